"""Where a reference fell off the beam: the step and rank agree with a plain walk over the trace's
hypotheses and a count over every extension, and the verdict agrees with re-running the search with a
beam wide enough to keep the reference."""
from __future__ import annotations

import pytest
import torch

from explorer.config import DecodeConfig
from explorer.studies.contrastive.fall import MODEL_ERROR, NO_ERROR, SEARCH_ERROR, reference_fall
from explorer.decoding.beam import beam_search
from explorer.decoding.beam_trace import KEPT
from explorer.decoding.core import constrain
from explorer.decoding.teacher import score_targets
from support.model_helpers import make_model
from support.numerics import score_atol

torch.set_num_threads(1)
CFG = dict(length_penalty="none", max_len_a=1.0, max_len_b=4, n_best=1)


@pytest.fixture(scope="module")
def model():
    m = make_model(1)
    norm = m.decoder.layers[-1].ffn_block.norm            # sharper outputs: sentences of several tokens
    with torch.no_grad():
        norm.weight.mul_(1.2)
        norm.bias.mul_(1.2)
    return m


def sources(n: int, seed: int = 0) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(4, 40, (int(torch.randint(3, 7, (1,), generator=gen)),), generator=gen).tolist() + [3]
            for _ in range(n)]


def cfg(beam: int) -> DecodeConfig:
    return DecodeConfig(beam_size=beam, **CFG)


def plain_walk(model, src, ref, beam):
    """The second implementation: the first step whose kept hypotheses (as token lists) lack ref's
    prefix, and its rank counted over every extension of the hypotheses kept one step before."""
    trace = beam_search(model, [src], cfg(beam), trace=True)[0].trace
    cand = trace.candidates
    ref_lp = score_targets(model, [src], [ref], cfg(beam))[0].token_logprobs
    for t in range(len(ref)):
        rows = trace.step_rows(t)
        kept = {tuple(trace.tokens(int(r))) for r in rows if cand["status"][r] == KEPT}
        finished = {tuple(trace.tokens(int(r))) for r in rows if trace.status(int(r)) == "finished"}
        if tuple(ref[:t + 1]) in kept:
            continue
        if tuple(ref[:t + 1]) in finished:
            return None, None
        before = [([], 0.0)] if t == 0 else [(trace.tokens(int(r)), float(cand["score"][r]))
                                             for r in trace.step_rows(t - 1) if cand["status"][r] == KEPT]
        mine = sum(ref_lp[:t + 1])
        above = 0
        with torch.no_grad():
            for prefix, score in before:
                lp = model(torch.tensor([src]), torch.tensor([[2] + prefix]))[:, -1]
                lp = constrain(lp.clone(), t, 0, model.cfg.special)[0].double()
                above += int(((score + lp) > mine + 1e-4).sum())
        return t, above + 1
    return None, None


def wide_enough(model, src, ref):
    """The smallest beam (up to 16) whose search keeps the reference to the end."""
    for beam in (2, 4, 8, 16):
        fall = reference_fall(model, src, ref, cfg(beam))
        if fall.step is None and fall.fate in ("output", "finished"):
            return beam, fall
    return None, None


def test_a_wider_beams_better_output_is_a_search_error_found_where_the_walk_finds_it(model):
    checked = 0
    for src in sources(8):
        narrow = beam_search(model, [src], cfg(1))[0].best
        wide = beam_search(model, [src], cfg(16))[0].best
        if not wide.finished or wide.ids == narrow.ids or wide.score <= narrow.score + 1e-3:
            continue
        fall = reference_fall(model, src, wide.ids, cfg(1))
        assert fall.verdict == SEARCH_ERROR and fall.fate in ("pruned", "not ranked")
        # teacher-forced sums against the searches' (other batch shapes): within score_atol (support.numerics)
        assert fall.reference_score == pytest.approx(wide.score, abs=score_atol(model, wide.token_logprobs))
        assert fall.output == narrow.ids
        assert fall.output_score == pytest.approx(narrow.score, abs=score_atol(model, narrow.token_logprobs))
        step, rank = plain_walk(model, src, wide.ids, 1)
        assert (fall.step, fall.rank) == (step, rank)
        assert fall.rank > 1 and fall.prefix_score < fall.last_kept_score
        # re-run with a beam wide enough to keep the reference: it scores at least the reference, so above
        # the narrow output: the search had lost it
        beam, kept = wide_enough(model, src, wide.ids)
        slack = score_atol(model, wide.token_logprobs)
        assert beam is not None and kept.output_score >= fall.reference_score - slack
        assert fall.reference_score > fall.output_score     # chosen so: the wide beam's is 1e-3 better or more
        assert "search error" in fall.text() and f"step {fall.step + 1}" in fall.text()
        checked += 1
    assert checked >= 2


def test_a_reference_the_model_dislikes_is_a_model_error_even_when_a_wide_beam_keeps_it(model):
    gen = torch.Generator().manual_seed(1)
    checked = 0
    for src in sources(6, seed=1):
        ref = torch.randint(4, 40, (2,), generator=gen).tolist() + [3]
        fall = reference_fall(model, src, ref, cfg(2))
        assert fall.verdict == MODEL_ERROR and fall.reference_normalized < fall.output_normalized
        assert (fall.step, fall.rank) == plain_walk(model, src, ref, 2)
        beam, kept = wide_enough(model, src, ref)
        if beam is not None:                           # kept to the end, still not returned: the model prefers
            assert kept.verdict == MODEL_ERROR and kept.output != kept.reference
        checked += fall.step is not None
    assert checked >= 3


def test_the_output_itself_is_no_error(model):
    outs = [(src, beam_search(model, [src], cfg(16))[0].best) for src in sources(8)]
    src, out = next((src, out) for src, out in outs if out.finished)
    fall = reference_fall(model, src, out.ids[:-1], cfg(16))           # EOS appended
    assert fall.verdict == NO_ERROR and fall.fate == "output" and fall.step is None
    assert fall.reference_score == pytest.approx(out.score, abs=score_atol(model, out.token_logprobs))
    assert fall.text().startswith("the output is the reference")
