"""Fine-tuning an imported Marian model with `python -m explorer.train --init-from`, and comparing the
child with its parent.

An imported OPUS-MT model differs from one trained here in what the trainer must not assume: its
special ids (eos 0, pad the last id and the decoder's start), its tokenizer (a VocabTokenizer:
source.spm, target.spm, vocab.json) and its history (no step or learning rate recorded, so the
fine-tuning recipe falls back to a fixed peak). The parent is a small random MarianMTModel
(tests/support/marian_helpers.py) imported with import_marian; the trainer runs a few steps on
a TSV of its sentences. Checked: the batches the trainer builds (padded with the model's pad id,
targets = start + pieces + eos, the loss blind to padding), and the child: it loads, keeps the
tokenizer and the ids, has moved, scores its training pairs better, records its own rate and
says in its card where it came from; then the Checkpoints page and explorer.evaluation.comparison
on parent and child.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from explorer.data import load_corpus
from explorer.evaluation import comparison as cmp
from explorer.evaluation.scores import teacher_forced_loss
from explorer.store import run_files as rf
from explorer.store import run_paths as rp
from explorer.store.card import FINE_TUNE_TOOL, model_card
from explorer.store.checkpoint import load_checkpoint
from explorer.text.vocab_tokenizer import VocabTokenizer
from explorer.data.encoded import encode_pairs
from explorer.training.inputs import BatchPlan
from explorer.training.schedule import UNRECORDED_PEAK, fine_tune_schedule
from explorer.config import TrainConfig
from support.marian_helpers import SRC_LINES, TGT_LINES, random_marian
from support.numerics import model_atol
from support.train_helpers import run

STEPS, MAX_LEN = 6, 64
SENTENCE = SRC_LINES[0]


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    """{parent, child, models, runs, data}: an imported small Marian model and a fine-tune of it."""
    from explorer.interop.hf_import import import_marian

    root = tmp_path_factory.mktemp("fine-tune-imported")
    random_marian(root / "hf")
    parent = import_marian(str(root / "hf"), root / "models" / "opus-mt-small", dtype=torch.float32)
    data = root / "pairs.tsv"                   # 8 pairs x 3: the split keeps most of them for training
    data.write_text("".join(f"{s}\t{t}\n" for s, t in zip(SRC_LINES * 3, TGT_LINES * 3)), encoding="utf-8")
    run_dir = root / "runs" / "tuned"
    proc = run([sys.executable, "-m", "explorer.train", "--run-dir", str(run_dir), "--init-from", str(parent),
                "--dataset", str(data), "--max-steps", str(STEPS), "--batch-tokens", "300", "--warmup", "1",
                "--lr-factor", "0.03", "--label-smoothing", "0", "--eval-every", str(STEPS), "--eval-sentences", "2",
                "--save-every", str(STEPS), "--log-every", "1", "--threads", "1", "--max-len", str(MAX_LEN)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    child = rp.checkpoint_dirs(run_dir)[-1]
    return {"parent": parent, "child": child, "models": parent.parent, "runs": run_dir.parent, "data": data,
            "run_dir": run_dir}


def test_the_trainers_batches_use_marians_ids(family):
    """What the trainer feeds the parent: pad-padded batches, start + pieces + eos targets, a loss
    that ignores the padding (equal to cross-entropy with ignore_index=pad)."""
    parent = load_checkpoint(family["parent"])
    special = parent.config.special
    assert (special.eos, special.pad, special.start) == (0, parent.config.tgt_vocab_size - 1,
                                                         parent.config.tgt_vocab_size - 1)
    pairs = load_corpus(str(family["data"])).train
    split = encode_pairs(parent.tokenizer, pairs, MAX_LEN, special)
    assert all(t[0] == special.start and t[-1] == special.eos and special.pad not in t[1:] for t in split.tgt)
    assert all(s[-1] == special.eos and special.pad not in s for s in split.src)
    plan = BatchPlan(split, TrainConfig(batch_tokens=300, max_len=MAX_LEN))
    index = max(plan.epoch_batches(0), key=len)
    src, tgt_in, tgt_out = plan.tensors(index, "cpu")                             # [B, S], [B, T], [B, T]
    lengths = [len(split.src[i]) for i in index]
    assert len(set(lengths)) > 1, "the batch should need padding"
    for row, n in zip(src, lengths):
        assert row[n:].eq(special.pad).all() and row[n - 1] == special.eos
    assert tgt_in[:, 0].eq(special.start).all()
    model = parent.model
    with torch.no_grad():
        loss = model.loss(src, tgt_in, tgt_out)
        logits = model(src, tgt_in, return_logits=True)                           # [B, T, V]
        want = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                               ignore_index=special.pad, reduction="sum")
        padded = [torch.cat([t, torch.full((t.shape[0], 3), special.pad)], 1) for t in (src, tgt_in, tgt_out)]
        more = model.loss(*padded)                                                # [B, S+3], [B, T+3], [B, T+3]
    # the loss path skips padded rows (other shapes, other orders): every token's loss is positive, so the
    # total bounds the partial sums; model_atol (support.numerics). A padded row counted would add > 1
    assert float(loss) == pytest.approx(float(want), abs=model_atol(model, want))
    assert float(more) == pytest.approx(float(loss), abs=model_atol(model, want))   # more padding: the same loss


def test_the_child_keeps_marians_tokenizer_and_ids_and_learned(family):
    parent, child = load_checkpoint(family["parent"]), load_checkpoint(family["child"])
    assert isinstance(child.tokenizer, VocabTokenizer)
    assert child.tokenizer.model_bytes() == parent.tokenizer.model_bytes()
    for key in ("eos_id", "pad_id", "unk_id", "decoder_start_id", "tgt_vocab_size", "d_model"):
        assert getattr(child.config, key) == getattr(parent.config, key), key
    assert child.config.eos_id == 0 and child.config.pad_id == child.config.tgt_vocab_size - 1
    moved = [n for n, p in parent.model.state_dict().items() if not torch.equal(p, child.model.state_dict()[n])]
    assert moved and any(n.startswith("encoder.") for n in moved) and any(n.startswith("decoder.") for n in moved)
    pairs = load_corpus(str(family["data"])).train
    split = encode_pairs(parent.tokenizer, pairs, MAX_LEN, parent.config.special)
    before = teacher_forced_loss(parent.model, split, "cpu")
    after = teacher_forced_loss(child.model, split, "cpu")
    assert torch.isfinite(torch.tensor([before, after])).all()
    assert after < before, (before, after)
    records = rf.read_metrics(family["run_dir"])
    assert [r["step"] for r in records if r.get("kind") == "train"] == list(range(1, STEPS + 1))
    assert any(r.get("kind") == "eval" for r in records)                          # greedy decoding with eos 0 ran
    history = child.meta["training"]
    assert history["init_from"] == str(family["parent"]) and history["last_lr"] > 0
    assert history["corpus"] == load_corpus(str(family["data"])).name         # its training file, by content
    assert fine_tune_schedule(history, child.config.d_model).ended_at_known     # its own fine-tune knows its rate


def test_the_childs_card_says_where_it_came_from(family):
    parent, child = load_checkpoint(family["parent"]), load_checkpoint(family["child"])
    before, card = model_card(parent.card), model_card(child.card)
    assert card is not None and card.fine_tuned_from == str(family["parent"])
    assert str(family["parent"]) in card.source and before.source in card.source
    assert card.tool == FINE_TUNE_TOOL and card.converted is None                # not itself an import
    assert card.languages == before.languages and card.license == before.license
    assert card.parameters == child.model.num_parameters()
    assert str(family["data"]) in card.data
    assert "test" not in child.card                                               # the parent's scores are not its


def test_an_imported_model_gets_the_fixed_fine_tuning_peak(family):
    parent = load_checkpoint(family["parent"])
    recipe = fine_tune_schedule(parent.meta["training"], parent.config.d_model)
    assert "step" not in parent.meta["training"] and "last_lr" not in parent.meta["training"]
    assert recipe.ended_at is None and not recipe.ended_at_known
    assert recipe.peak == pytest.approx(UNRECORDED_PEAK)


def test_comparison_of_parent_and_child(family):
    parent, child = load_checkpoint(family["parent"]), load_checkpoint(family["child"])
    assert cmp.same_tokenizer(parent.tokenizer, child.tokenizer)
    from explorer.config import DecodeConfig
    from explorer.decoding import attention_trace, translate
    out = translate(parent.model, parent.tokenizer, SENTENCE, DecodeConfig(strategy="greedy"))
    scores = cmp.score_under_both(parent, child, SENTENCE, out.text)
    assert scores.aligned and scores.lp_a != pytest.approx(scores.lp_b, abs=1e-6)
    assert scores.lp_a[-1] != 0.0                                                 # eos (id 0) scored too
    lp_a, lp_b = cmp.score_ids_under_both(parent, child, out.src_ids, out.best.ids)
    assert len(lp_a) == len(lp_b) == len(out.best.ids)
    ta = attention_trace(parent.model, parent.tokenizer, out.src_ids, out.best.ids)
    tb = attention_trace(child.model, child.tokenizer, out.src_ids, out.best.ids)
    diff = cmp.attention_difference(ta, tb, "cross")
    assert diff.shape[:2] == (parent.config.n_decoder_layers, parent.config.n_heads) and abs(diff).max() > 0
    change = dict(cmp.param_change(parent.model, child.model))
    assert change and all(v >= 0 for v in change.values()) and max(change.values()) > 0
    pairs, where = cmp.test_pairs(family["child"], child.meta)                   # the child's dataset's test split
    assert pairs and str(family["data"]) in where
    for ckpt in (parent, child):
        res = cmp.test_scores(ckpt.model, ckpt.tokenizer, pairs)
        assert res["n"] == len(pairs) and 0 <= res["bleu"] <= 100
    rows = {r["path"]: r for r in cmp.checkpoint_rows(_infos(family))}
    assert rows[str(family["child"])]["preset"].startswith("fine-tuned from")


def _infos(family):
    from explorer.store.catalog import list_checkpoints
    return list_checkpoints(family["models"], family["runs"])


def test_the_checkpoints_page_compares_parent_and_child(family, monkeypatch):
    from support.app_support import chart, open_app, texts
    from webapp import state

    monkeypatch.setenv(state.ROOTS_ENV, os.pathsep.join([str(family["models"]), str(family["runs"])]))
    monkeypatch.delenv(state.MODELS_ENV, raising=False)
    state.refresh_checkpoints()
    try:
        healthy = [str(i.path) for i in state.available_checkpoints() if not i.error]
        a, b = healthy.index(str(family["parent"])), healthy.index(str(family["child"]))
        at = open_app(Path(family["parent"]).name, "webapp/pages/checkpoints.py", text=SENTENCE)
        at.selectbox(key="ck_a").set_value(a).run()
        at.selectbox(key="ck_b").set_value(b).run()
        assert not at.exception, [e.value for e in at.exception]
        assert not at.error, texts(at.error)
        for key in ("ck_lp_A", "ck_lp_B", "ck_grid", "ck_params"):
            assert chart(at, key)["data"], key                  # aligned log-probs, B − A attention, weights moved
        at.radio(key="ck_testset").set_value("B").run()
        at.button(key="ck_score").click().run()
        assert not at.exception and not at.error, texts(at.error)
        assert "greedy decoding" in texts(at.caption)
    finally:
        state.refresh_checkpoints()
