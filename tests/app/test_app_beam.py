"""AppTest of the Beam-search page on a real checkpoint: it runs, its widgets change what is shown,
forcing a token yields a translation that starts with the forced prefix, bad input is friendly.

Checkpoint: checkpoints/bible-es-en, else checkpoints/numbers-en-de, else the newest
runs/*/checkpoints/step_*; the tests skip (saying so) when there is none.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from support.app_support import (array, chart, checkpoint, default_roots, no_exception,  # noqa: F401
                                  only_a_broken_checkpoint, open_app, texts)
from explorer.store.checkpoint import load_checkpoint
from explorer.config import DecodeConfig

PAGE = "webapp/pages/beam.py"
pytestmark = pytest.mark.usefixtures("default_roots")


def open_page(ckpt_name: str, text: str | None, **query):
    return open_app(ckpt_name, PAGE, text, query)


def n_steps(at) -> int:
    return at.slider(key="beam_step").max if any(s.key == "beam_step" for s in at.slider) else 1


def tree_nodes(at) -> int:
    spec = chart(at, "beam_tree")
    statuses = ("forced", "kept", "pruned", "finished", "truncated")
    return sum(len(array(t["x"])) for t in spec["data"] if t.get("name") in statuses)


def test_page_runs_and_shows_the_search(checkpoint):
    info, text = checkpoint
    at = open_page(info.name, text)
    no_exception(at)
    assert not at.error, texts(at.error)
    table = at.dataframe[0].value
    assert len(table) == 2 * 5 and list(table["rank"]) == list(range(1, 11))   # 2k candidates, k = 5; from 1
    assert set(table["status"]) <= {"kept", "pruned", "finished", "truncated"}
    assert tree_nodes(at) == n_steps(at) * 10
    assert "**Best:**" in texts(at.markdown)
    labels = {b.proto.label for b in at.get("download_button")}
    assert {"Whole trace as CSV", "Attention (mean of heads) as CSV", "Download the whole analysis (JSON)"} <= labels


def test_step_slider_changes_the_table_and_the_url(checkpoint):
    info, text = checkpoint
    at = open_page(info.name, text)
    first = at.dataframe[0].value
    assert n_steps(at) >= 2, "the sentence should need more than one step"
    at.slider(key="beam_step").set_value(2).run()
    no_exception(at)
    second = at.dataframe[0].value
    assert at.query_params["step"] == "2"
    assert not first[["token", "cumulative"]].equals(second[["token", "cumulative"]])
    assert (second["cumulative"].max() < first["cumulative"].max())          # log-probs only go down
    assert set(second["extends"]) != {"<s>"}


def test_tree_stays_put_across_steps_unless_asked_to_follow(checkpoint):
    """Off (default): the tree's spec is the same at every step, so the browser keeps it as drawn.
    On: a guide line at the step (1-based x) and a ring on the chosen hypothesis."""
    info, text = checkpoint
    at = open_page(info.name, text)
    before = chart(at, "beam_tree")
    at.slider(key="beam_step").set_value(2).run()
    assert chart(at, "beam_tree") == before and not before["layout"].get("shapes")
    at.toggle(key="beam_follow").set_value(True).run()
    no_exception(at)
    followed = chart(at, "beam_tree")
    assert [shape["x0"] for shape in followed["layout"]["shapes"]] == [2]
    rings = [w for t in followed["data"] if t.get("marker", {}).get("line", {}).get("width") is not None
             for w in array(t["marker"]["line"]["width"])]
    assert sum(1 for w in rings if w > 0) == 1


def test_step_comes_from_the_url(checkpoint):
    info, text = checkpoint
    at = open_page(info.name, text, step=2)
    no_exception(at)
    assert at.slider(key="beam_step").value == 2
    at = open_page(info.name, text, step=9999)                                # clamped, not an error
    no_exception(at)
    assert at.slider(key="beam_step").value == at.slider(key="beam_step").max


def test_beam_size_and_length_penalty_change_the_tree(checkpoint):
    info, text = checkpoint
    at = open_page(info.name, text)
    nodes_5, normalised = tree_nodes(at), at.dataframe[0].value["normalised"].to_numpy()
    at.slider(key="beam_step").set_value(2).run()                            # a row of the old search is chosen
    at.slider(key="beam_size").set_value(2).run()
    no_exception(at)
    assert len(at.dataframe[0].value) == 4
    at.slider(key="beam_step").set_value(1).run()
    assert tree_nodes(at) == 4 * n_steps(at) != nodes_5
    at.slider(key="beam_size").set_value(5).run()
    at.slider(key="beam_step").set_value(2).run()
    gnmt = at.dataframe[0].value["normalised"].to_numpy()
    at.selectbox(key="beam_lp").set_value("average").run()
    no_exception(at)
    average = at.dataframe[0].value
    assert np.allclose(average["normalised"], average["cumulative"] / 2, atol=1e-4)   # lp(2) = 2
    assert not np.allclose(gnmt, average["normalised"].to_numpy())
    assert len(normalised) == 10


def test_forcing_an_alternative_token_starts_the_output_with_it(checkpoint):
    info, text = checkpoint
    at = open_page(info.name, text)
    at.slider(key="beam_step").set_value(2).run()
    row = next(s for s in at.selectbox if s.key.startswith("beam_row_1_")).value
    alt = next(s for s in at.selectbox if s.key.startswith("beam_alt_1_"))
    choice = alt.options[1] if len(alt.options) > 1 else alt.options[0]
    alt.select_index(alt.options.index(choice)).run()
    at.button(key="beam_force").click().run()
    no_exception(at)
    forced = at.session_state["beam_forced"]
    assert forced["step"] == 1 and len(forced["prefix"]) == 2 and row is not None
    tokenizer = load_checkpoint(info.path, device="cpu").tokenizer
    piece = tokenizer.id_to_piece(forced["prefix"][1], "tgt")
    assert re.fullmatch(rf"{re.escape(piece)}  \(log p -?\d+\.\d\d\)", choice), (choice, piece)   # the token picked
    codes = [c.value for c in at.code]
    assert len(codes) == 2, codes                                            # original | forced
    expected = tokenizer.decode(forced["prefix"], side="tgt").strip()
    assert codes[1].strip().startswith(expected), (codes[1], expected)
    assert any("original vs forced" in h.value for h in at.subheader)
    assert any(c.proto.id.endswith("-beam_compare") for c in at.get("plotly_chart"))
    assert all(c.proto.wrap_lines for c in at.code)                         # a long sentence wraps, never cut off


def test_forcing_a_typed_word(checkpoint):
    info, text = checkpoint
    at = open_page(info.name, text)
    word = {"de": "neun", "en": "earth"}.get(info.meta.get("tgt_lang"), "the")
    at.text_input(key="beam_typed").input(word).run()
    at.button(key="beam_force").click().run()
    no_exception(at)
    prefix = at.session_state["beam_forced"]["prefix"]
    tokenizer = load_checkpoint(info.path, device="cpu").tokenizer
    assert prefix == [int(t) for t in tokenizer.encode(word, side="tgt")]    # step 1: nothing before it
    assert 1 not in prefix, "the typed word should be in the target vocabulary"
    assert [c.value for c in at.code][1].strip().startswith(tokenizer.decode(prefix, side="tgt").strip())


@pytest.mark.parametrize("text, message", [("", "Type a sentence"), ("   ", "Type a sentence")])
def test_empty_text_is_a_friendly_info(checkpoint, text, message):
    info, _ = checkpoint
    at = open_page(info.name, text)
    no_exception(at)
    assert message in texts(at.info) and not at.dataframe


@pytest.mark.parametrize("text", ["<img src=x onerror=alert(1)>", "🙂🙃 " * 40, "你好，世界。Привет мир",
                                  "x " * 2600])
def test_odd_input_never_raises(checkpoint, text):
    info, _ = checkpoint
    at = open_page(info.name, text)
    no_exception(at)
    assert not re.search(r"(?<!\\)<img", texts(at.markdown))                  # escaped wherever shown
    assert at.text_input(key="beam_text").value == text                        # shown literally
    if len(text) > 2000:
        assert "only the first 2,000 are used" in texts(at.warning)


def test_a_links_text_cut_on_reading_is_said_to_be_cut(checkpoint):
    info, _ = checkpoint
    at = open_app(info.name, PAGE, query={"text": "x " * 2600})
    no_exception(at)
    assert "The text is 5,200 characters long; only the first 2,000 are used" in texts(at.warning)


def test_greedy_settings_say_beam_search_is_needed(checkpoint):
    info, text = checkpoint
    at = open_app(info.name, PAGE, text, session={"decode_cfg": DecodeConfig(strategy="greedy").to_dict()})
    no_exception(at)
    assert "beam search is needed" in texts(at.info)
    assert len(at.dataframe[0].value) == 10                                   # the page still runs its search


def test_damaged_checkpoint_gives_a_message(checkpoint, tmp_path, monkeypatch):
    info, text = checkpoint
    at = open_page(only_a_broken_checkpoint(tmp_path, monkeypatch), text)
    no_exception(at)
    assert "Pick a working checkpoint" in texts(at.info)


def test_the_beam_page_reuses_the_translation_the_other_pages_made(default_roots):
    """With the app's default settings the Translate page's beam search and the Beam page's are one and the
    same call, so a student's second page costs no second decode (a classroom's server CPU)."""
    from webapp import models
    text = "three hundred and forty two"
    models.translate.clear()
    at = open_app("numbers-en-de", "webapp/pages/translate.py", text)
    no_exception(at)
    assert len(models.translate.cache) == 1
    at.switch_page(PAGE).run()
    no_exception(at)
    assert n_steps(at) > 1
    assert len(models.translate.cache) == 1            # a cache hit, not a second decode


def test_the_whole_view_is_in_the_url_clamped_and_one_based(checkpoint):
    """Beam size, step, rank, layer and the tree's marks come from a link and go back into the URL; out of
    range they are clamped and the URL says so; a key the page does not read is dropped; the trace CSV
    counts steps and ranks from 1, like the page."""
    from webapp import downloads
    info, text = checkpoint
    at = open_page(info.name, text, size=3, step=2, rank=2, layer=1, mark=1, junk="x")
    no_exception(at)
    assert at.slider(key="beam_size").value == 3 and at.slider(key="beam_step").value == 2
    assert at.selectbox(key="beam_layer").value == 1 and at.toggle(key="beam_follow").value is True
    row = next(s for s in at.selectbox if s.key.startswith("beam_row_1_"))
    assert row.format_func(row.value).startswith("rank 2: ")
    assert {k: at.query_params[k] for k in ("size", "step", "rank", "layer", "mark")} == \
        {"size": "3", "step": "2", "rank": "2", "layer": "1", "mark": "1"}
    assert "junk" not in at.query_params
    frame = at.dataframe[0].value
    assert list(frame["rank"]) == list(range(1, 7))                         # 2k = 6 candidates, ranked from 1

    far = open_page(info.name, text, size=999, step=9999, rank=-4, layer=77, mark="yes")
    no_exception(far)
    n_layers = far.selectbox(key="beam_layer").options[-1]
    assert far.slider(key="beam_size").value == 12 and far.query_params["size"] == "12"      # TREE_BEAM_CAP
    assert far.query_params["step"] == str(int(n_steps(far))) and far.query_params["layer"] == str(n_layers)
    assert far.query_params["mark"] == "0"                                    # malformed: the default, written back
    assert far.query_params["rank"] in [str(r) for r in far.dataframe[0].value["rank"]]
    from explorer.decoding import translate
    from webapp.numbering import one_based_trace
    ckpt = load_checkpoint(info.path, device="cpu")
    trace = translate(ckpt.model, ckpt.tokenizer, text, DecodeConfig(strategy="beam", beam_size=2, n_best=2,
                                                                  trace_top_k=8), trace=True).beam_trace
    raw, shown = trace.to_dataframe(), one_based_trace(trace.to_dataframe())       # what the CSV holds
    assert (shown["step"] == raw["step"] + 1).all() and (shown["rank"] == raw["rank"] + 1).all()
    assert shown["step"].min() == 1 and shown["rank"].min() == 1
    kept = raw["slot"] >= 0
    assert (shown["slot"][kept] == raw["slot"][kept] + 1).all() and shown["slot"][~kept].isna().all()


def test_force_starts_on_the_next_best_token_not_the_one_already_chosen(checkpoint):
    """"Force another token here" offered the hypothesis's own token first, so pressing it at once changed
    nothing. It starts on the best other token: the forced prefix leaves the original translation there."""
    from explorer.decoding import translate
    from webapp import state

    info, text = checkpoint
    at = open_page(info.name, text)
    at.slider(key="beam_step").set_value(2).run()
    alt = next(s for s in at.selectbox if s.key.startswith("beam_alt_1_"))
    assert "already chosen" not in alt.format_func(alt.value)
    at.button(key="beam_force").click().run()                              # the default pick, unchanged
    no_exception(at)
    prefix = at.session_state["beam_forced"]["prefix"]
    ckpt = load_checkpoint(info.path, device="cpu")
    best = translate(ckpt.model, ckpt.tokenizer, text, DecodeConfig(**state.decode_settings())).best
    assert prefix[:1] == list(best.ids[:1]) and prefix[1] != best.ids[1], (prefix, best.ids[:2])
    codes = [c.value for c in at.code]
    assert codes[0] != codes[1]                                             # original | forced: they differ


def test_exports_are_named_for_the_checkpoint(checkpoint, monkeypatch):
    """One export convention (webapp/downloads.py): every figure through downloads.chart in the sidebar's
    format, every file (the trace's CSV and the analysis JSON too) named after the checkpoint."""
    from support.exports import assert_named_for, recorded_downloads

    info, text = checkpoint
    seen = recorded_downloads(monkeypatch)
    at = open_app(info.name, PAGE, text, session={"figure_format": "svg"})
    no_exception(at)
    assert_named_for(at, seen, info.name, {"beam_tree", "beam_attn_step", "beam_attn_prefix"})
    assert {"Whole trace as CSV", "This step's attention per head as CSV"} <= {b["label"] for b in seen}


def test_a_long_prefix_shows_its_end_where_hypotheses_differ():
    """The 'extends' cell showed each prefix's start, cut at the column's width: every row read the same."""
    from webapp.views.beam import _tail

    prefix = "▁Yahweh ▁God ▁called ▁the ▁light ▁day , ▁and ▁the ▁darkness ▁he ▁called"
    assert _tail(prefix) == "…" + prefix[-36:] and _tail(prefix).endswith("▁he ▁called")
    assert _tail("▁Yahweh ▁God") == "▁Yahweh ▁God"
