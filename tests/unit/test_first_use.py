"""The library side of the first-use fixes: checkpoints grouped by run, a checkpoint's own recorded dev
BLEU, the beam stop reasons in words, bertviz's 1-based labels and a frame that holds the model view,
uploaded files' names, and the decoding settings' URL form."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from explorer.decoding.beam import STOP_REASONS
from explorer.evaluation import comparison as cmp
from explorer.plots.beams import STOP_WORDS, stop_reason_text
from explorer.store import run_paths as rp
from explorer.store.catalog import CheckpointInfo
from webapp import bertviz_offline as bv
from webapp import decode_url

ROOT = Path(__file__).resolve().parents[2]


def info(path: str, **training) -> CheckpointInfo:
    return CheckpointInfo(name=Path(path).name, path=Path(path), meta={"training": training} if training else {})


def test_checkpoints_group_by_run_folder_or_recorded_run_name():
    infos = [info("checkpoints/big", run="big", step=900), info("checkpoints/big-early", run="big", step=150),
             info("checkpoints/imported"),
             info("runs/mine/checkpoints/step_000020", step=20), info("runs/mine/checkpoints/step_000010", step=10),
             info("checkpoints/mine", run="mine", step=5),
             CheckpointInfo(name="broken", path=Path("checkpoints/broken"), meta={"training": {"run": "big"}},
                            error="damaged")]
    groups = cmp.runs_of(infos)
    assert [g.name for g in groups] == ["big", "mine", "mine (mine)"]
    assert [i.name for i in groups[0].checkpoints] == ["big-early", "big"] and groups[0].steps == (150, 900)
    assert groups[1].steps == (10, 20) and groups[2].steps == (5,)


def test_the_shipped_runs_are_grouped():
    if not (ROOT / "checkpoints" / "numbers-en-de-step150" / "config.json").is_file():
        pytest.skip("needs the shipped checkpoints")
    from explorer.store.catalog import list_checkpoints

    groups = {g.name: g for g in cmp.runs_of(list_checkpoints(ROOT / "checkpoints"))}
    assert [i.name for i in groups["numbers-en-de"].checkpoints] == [
        "numbers-en-de-step150", "numbers-en-de-step300", "numbers-en-de"]
    assert [i.name for i in groups["bible-es-en"].checkpoints] == ["bible-es-en-epoch1", "bible-es-en"]


def test_dev_bleu_is_the_recorded_one_only_for_its_own_step():
    rows = cmp.checkpoint_rows([info("checkpoints/a", step=300, best_step=300, best_dev_bleu=12.345),
                                info("checkpoints/b", step=900, best_step=450, best_dev_bleu=99.0),
                                info("checkpoints/c", step=3, best_step=3, best_dev_bleu=float("nan")),
                                info("checkpoints/d", step=True, best_step=True, best_dev_bleu="1")])
    assert [r["dev BLEU"] for r in rows] == [12.35, None, None, None]


def test_every_stop_reason_has_words():
    assert set(STOP_REASONS) <= set(STOP_WORDS)
    assert all(code not in stop_reason_text(code) for code in STOP_REASONS if code != "running")
    assert "weird" in stop_reason_text("weird")


def stacks(layers=6, heads=8, src=30, tgt=28):
    rng = np.random.default_rng(0)

    def soft(*shape):
        x = rng.random(shape)
        return x / x.sum(-1, keepdims=True)
    return {"encoder": soft(layers, heads, src, src), "decoder": soft(layers, heads, tgt, tgt),
            "cross": soft(layers, heads, tgt, src)}


def params_of(html: str) -> dict:
    return json.loads(re.search(r"const params = (\{.*?\});", html).group(1))


def test_bertviz_labels_layers_and_heads_from_one():
    s = stacks(layers=3, heads=4, src=5, tgt=4)
    src, tgt = [f"s{i}" for i in range(5)], [f"t{i}" for i in range(4)]
    model = params_of(bv.render("model", s, src, tgt)[0])
    assert model["include_layers"] == [1, 2, 3] and model["include_heads"] == [1, 2, 3, 4]
    assert len(model["attention"][0]["attn"]) == 3                                 # the data is still all layers
    head = params_of(bv.render("head", s, src, tgt, layer=2)[0])
    assert head["include_layers"] == [1, 2, 3] and head["layer"] == 3               # opens on the third layer


@pytest.mark.parametrize("layers,heads,tokens", [(6, 8, 30), (2, 4, 10), (12, 16, 60), (1, 2, 3)])
def test_the_model_view_frame_holds_every_layer(layers, heads, tokens):
    s = stacks(layers, heads, tokens, tokens - 2)
    shown = len(bv.choose_layers(s, 0)[0])
    thumbnail = tokens * 7 * (12 / heads) + 10                                     # model_view.js's arithmetic
    drawing = max(shown * thumbnail + 38, tokens * 18 + 55)
    assert drawing + 30 <= bv.height("model", s) <= drawing + 120
    assert bv.height("head", s) >= tokens * 22.5 + 30 + 30


def test_upload_names_are_cleaned_and_read_back_as_untrusted(tmp_path):
    assert rp.clean_upload_name("../../etc/passwd") == "passwd"
    assert rp.clean_upload_name("C:\\Users\\me\\corpus.tsv") == "corpus.tsv"
    assert rp.clean_upload_name("\u202eevil\x00.tsv") == "evil .tsv"
    assert rp.clean_upload_name("") == rp.clean_upload_name("..") == "upload.tsv"
    long = rp.clean_upload_name("x" * 500 + ".tsv")
    assert len(long) <= rp.UPLOAD_NAME_CHARS and long.endswith(".tsv")
    folder = tmp_path / rp.UPLOADS
    folder.mkdir()
    tsv = folder / "0123abcd.tsv"
    tsv.write_text("a\tb\n")
    assert rp.dataset_label(str(tsv)) == "0123abcd.tsv"                             # no name kept: the file's
    rp.upload_name_file(tsv).write_bytes("my <b>data<b>\n\x1b[31m.tsv".encode() + b"\xff" * 3)
    assert rp.dataset_label(str(tsv)) == "my <b>data<b> [31m.tsv\ufffd\ufffd\ufffd"   # one line, no escapes
    assert rp.dataset_label("numbers") == "numbers" and rp.dataset_label("/data/x.tsv") == "x.tsv"


def test_decoding_settings_url_form_round_trips_and_refuses_bad_values():
    cfg = dict(decode_url.DEFAULTS, strategy="sample", temperature=0.7, top_k=40, top_p=0.9, seed=5, min_len=3)
    query = decode_url.to_query(cfg, 4)
    assert query["beam"] is None and query["maxlen"] is None and query["minlen"] == "3"
    back, samples = decode_url.from_query({k: v for k, v in query.items() if v is not None})
    assert back == cfg and samples == 4
    for key, bad in (("beam", "3.0"), ("temp", "nan"), ("lp", "GNMT"), ("dec", ""), ("seed", "9" * 5000),
                     ("alpha", "inf"), ("minlen", "x")):
        assert decode_url.from_query({key: bad}) == (decode_url.DEFAULTS, decode_url.DEFAULT_SAMPLES), (key, bad)
    for key, far, field, nearest in (("beam", "0", "beam_size", 1), ("beam", "17", "beam_size", 16),
                                     ("temp", "0", "temperature", 0.1), ("topp", "1.5", "top_p", 1.0),
                                     ("seed", "-1", "seed", 0)):      # out of range: the nearest allowed value
        assert decode_url.from_query({key: far})[0][field] == nearest, (key, far)
    assert decode_url.from_query({"samples": "11"})[1] == decode_url.SAMPLES_CAP
