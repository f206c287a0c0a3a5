"""The beam curve's fast path gives the old path's numbers: compact beam search (finished sentences leave
the decoder's batch) equals the library's beam search, hypothesis for hypothesis, and the curve's
batches split over two worker processes give the same rows as one process decoding them in turn."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from explorer.studies.contrastive import curve
from explorer.studies.contrastive.compact_beam import compact_beam_search
from explorer.studies.contrastive.curve import (Penalty, beam_config, curve_row, decode_set, library_decode_set,
                                        sentence_chrf)
from explorer.decoding.translate import decode
from explorer.files.places import REPO_ROOT
from explorer.studies.common.sentences import build_sentences
from explorer.runtime.progress import Cancelled
from explorer.store.checkpoint import load_checkpoint

torch.set_num_threads(1)
PENALTIES = (Penalty(), Penalty("gnmt", 0.6), Penalty("average"))


def held_out(name: str, n: int):
    from explorer.evaluation.scores import held_out_pairs

    ckpt = load_checkpoint(REPO_ROOT / "checkpoints" / name)
    pairs, _ = held_out_pairs(ckpt.path, ckpt.meta)
    return ckpt, build_sentences(ckpt.model, ckpt.tokenizer, pairs, n, "reference")


@pytest.fixture(scope="module", params=["numbers-en-de", "bible-es-en"])
def shipped(request):
    return held_out(request.param, 12 if request.param == "numbers-en-de" else 4)


@pytest.fixture(scope="module")
def numbers():
    return held_out("numbers-en-de", 12)


def same(a, b) -> bool:
    return (a.ids, a.token_logprobs, a.score, a.normalized, a.finished) == \
        (b.ids, b.token_logprobs, b.score, b.normalized, b.finished)


def test_compact_beam_search_equals_the_library_search(shipped):
    ckpt, sents = shipped
    numbers = ckpt.model.cfg.tgt_vocab_size < 100
    for beam, penalty in [(b, p) for b in (1, 3, 8) for p in PENALTIES] if numbers else [(5, p) for p in PENALTIES[:2]]:
        cfg = replace(beam_config(beam, penalty), n_best=beam)          # every hypothesis, not only the best
        old = decode(ckpt.model, sents.src, cfg)
        new = compact_beam_search(ckpt.model, sents.src, cfg)
        assert len(old) == len(new)
        for o, n in zip(old, new):
            assert o.meta == n.meta and o.max_len == n.max_len
            assert len(o.hypotheses) == len(n.hypotheses)
            assert all(same(a, b) for a, b in zip(o.hypotheses, n.hypotheses))
    # the sentences stop at different steps, so rows did leave the batch
    assert len({len(d.best.ids) for d in old}) > 1


def test_curve_rows_equal_the_old_path_in_one_and_two_processes(numbers, monkeypatch):
    ckpt, sents = numbers
    monkeypatch.setattr(curve, "ROWS_PER_BATCH", 4)          # several batches, so two workers share them
    for penalty in PENALTIES[:2]:
        before = {}
        for beam in (1, 4):
            cfg = beam_config(beam, penalty)
            old = library_decode_set(ckpt.model, sents.src, cfg)
            for workers in (1, 2):
                ticks = []
                new = decode_set(ckpt.model, sents.src, cfg, ticks.append, workers=workers)
                assert all(same(a, b) for a, b in zip(old, new))
                assert ticks[-1] == len(sents.src) and ticks == sorted(ticks) and len(ticks) > 1
            texts = [ckpt.tokenizer.decode(h.output_ids, side="tgt") for h in old]
            chrfs = sentence_chrf(texts, sents.refs)
            row = curve_row(beam, penalty, new, texts, sents.refs, chrfs, before.get("smaller"))
            assert row == curve_row(beam, penalty, old, texts, sents.refs, chrfs, before.get("smaller"))
            before["smaller"] = (old, chrfs)


def test_a_cancel_stops_the_workers(numbers, monkeypatch):
    ckpt, sents = numbers
    monkeypatch.setattr(curve, "ROWS_PER_BATCH", 4)

    def tick(done):
        raise Cancelled()
    with pytest.raises(Cancelled):
        decode_set(ckpt.model, sents.src, beam_config(4, Penalty()), tick, workers=2)


def test_a_curve_rows_figures_by_hand():
    """Each figure of a row worked out by hand on five made-up outputs: the share scored higher than the
    next smaller beam's output yet worse by chrF (only the first here: the second ties on score, the third
    and fourth gain chrF), the share of empty outputs, words against the references' words, mean scores."""
    from types import SimpleNamespace as Hyp
    hyps = [Hyp(score=-2.0, normalized=-1.0, output_ids=[5, 6]), Hyp(score=-1.0, normalized=-1.0, output_ids=[5]),
            Hyp(score=-1.5, normalized=-0.5, output_ids=[7, 8, 9]), Hyp(score=-0.2, normalized=-0.1, output_ids=[]),
            Hyp(score=-1.0, normalized=-1.0, output_ids=[4])]
    before = [Hyp(score=-4.0, normalized=-2.0, output_ids=[5]), Hyp(score=-1.0, normalized=-1.0, output_ids=[6]),
              Hyp(score=-9.0, normalized=-3.0, output_ids=[7]), Hyp(score=-0.4, normalized=-0.2, output_ids=[]),
              Hyp(score=-3.0, normalized=-3.0, output_ids=[4])]
    texts = ["a b", "c", "d e f", "", "k"]
    refs = ["a b c", "c d", "d e f", "g h i j", "k l"]
    row = curve_row(4, Penalty(), hyps, texts, refs, [30.0, 10.0, 60.0, 0.0, 25.0],
                    (before, [50.0, 50.0, 40.0, 0.0, 20.0]))
    assert row["higher_score_worse_chrf"] == 0.2
    assert row["empty"] == 0.2
    assert row["length_ratio"] == round(7 / 14, 4)
    assert row["mean_score"] == round((-2.0 - 1.0 - 1.5 - 0.2 - 1.0) / 5, 4)
    assert row["mean_normalized"] == round((-1.0 - 1.0 - 0.5 - 0.1 - 1.0) / 5, 4)
    assert row["beam"] == 4 and row["length_penalty"] == "none"
    assert curve_row(1, Penalty(), hyps, texts, refs, [0.0] * 5, None)["higher_score_worse_chrf"] is None
