"""The full model's encoder output reused for removals of decoder and cross heads (explorer.studies.heads.memo):
the teacher-forced losses and the one-pass checks are the same numbers as encoding every time, an
encoder head's removal never takes the kept output, and the head lab's JSON on a shipped model is
the same with and without the reuse (`--no-reuse`)."""
from __future__ import annotations

import pytest
import torch

from explorer.studies.common.command import checkpoint_and_held_out
from explorer.files.places import REPO_ROOT
from explorer.studies.heads.importance import HeadRemover, all_heads, teacher_loss
from explorer.studies.heads.job import LabSettings, run_head_lab
from explorer.studies.heads.memo import EncoderMemo, teacher_log_probs
from explorer.studies.common.sentences import SentenceSet, teacher_batches
from explorer.studies.heads.verify import greedy_outputs, still_greedy
from explorer.runtime.clock import TIMING_KEYS
from support.model_helpers import one_thread  # noqa: F401 (a fixture)

NUMBERS = REPO_ROOT / "checkpoints" / "numbers-en-de"


def sentences(n: int = 5) -> SentenceSet:
    g = torch.Generator().manual_seed(11)
    src = [torch.randint(4, 40, (2 + i,), generator=g).tolist() + [2] for i in range(n)]
    out = [torch.randint(4, 40, (1 + i,), generator=g).tolist() + [2] for i in range(n)]
    return SentenceSet(src=src, out=out, refs=["x"] * n, forced="reference")


def test_losses_with_the_kept_encoder_output_equal_encoding_each_time(model):
    sents, memo = sentences(), EncoderMemo()
    assert teacher_loss(model, sents, memo=memo) == teacher_loss(model, sents)
    for head in all_heads(model):
        assert teacher_loss(model, sents, [head], batch_size=2, memo=memo) == \
            teacher_loss(model, sents, [head], batch_size=2), head
    assert teacher_loss(model, sents, all_heads(model, ["decoder", "cross"]), memo=memo) == \
        teacher_loss(model, sents, all_heads(model, ["decoder", "cross"]))
    n_batches = len(list(teacher_batches(model, sents, 2)))
    decoder_side = len(all_heads(model, ["decoder", "cross"]))
    assert memo.encoded == 1 + n_batches                      # each batching encoded once, then taken
    assert memo.reused == (decoder_side - 1) * n_batches + 1


def test_an_encoder_head_removal_never_takes_the_kept_output(model):
    """A memo holding the wrong output for these sources would show in any pass that read it."""
    sents, memo = sentences(), EncoderMemo()
    teacher_loss(model, sents, memo=memo)
    for key, (memory, mask) in memo.kept.items():
        memo.kept[key] = (torch.zeros_like(memory), mask)    # poisoned
    assert teacher_loss(model, sents, [("encoder", 0, 1)], memo=memo) == teacher_loss(model, sents, [("encoder", 0, 1)])
    assert teacher_loss(model, sents, [("cross", 0, 1)], memo=memo) != teacher_loss(model, sents, [("cross", 0, 1)])


def test_the_memo_keeps_nothing_beyond_its_budget_and_still_answers(model):
    sents = sentences()
    memo = EncoderMemo(budget=0)
    assert teacher_loss(model, sents, [("decoder", 1, 0)], memo=memo) == teacher_loss(model, sents, [("decoder", 1, 0)])
    assert memo.kept == {} and memo.bytes == 0 and memo.reused == 0


@torch.no_grad()
def test_checks_with_the_kept_output_equal_checks_without(model):
    sents = sentences()
    src = sents.src
    full = greedy_outputs(model, src)
    remover = HeadRemover(model, None, sents)
    for head in all_heads(model, ["decoder", "cross"]):
        remover.apply([head])
        assert still_greedy(remover.model, src, full, memo=remover.memo) == still_greedy(remover.model, src, full)
    s, tgt_in = next(iter(teacher_batches(model, sents)))[1:3]
    assert torch.equal(teacher_log_probs(model, s, tgt_in, EncoderMemo()), model(s, tgt_in))


@pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs checkpoints/numbers-en-de")
def test_the_head_lab_json_is_the_same_with_and_without_the_reuse_on_a_shipped_model():
    ckpt, pairs = checkpoint_and_held_out(str(NUMBERS), "cpu")
    settings = LabSettings(sentences=3, seeds=0, points=1)
    reused = run_head_lab(ckpt.model, ckpt.tokenizer, pairs, settings)
    before = run_head_lab(ckpt.model, ckpt.tokenizer, pairs, settings, reuse=False)
    assert {k: v for k, v in reused.items() if k not in TIMING_KEYS} == \
        {k: v for k, v in before.items() if k not in TIMING_KEYS}
    assert reused["checks"]["encoder_batches_reused"] > 0 and before["checks"]["encoder_batches_reused"] == 0
