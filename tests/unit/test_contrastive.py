"""Contrastive attribution at one step (Yin & Neubig 2022) on the shipped model: integrated gradients
complete, gradient x input equal to a gradient taken by hand, batching without effect on the numbers,
the step read from a beam trace, and hostile foils refused with a message."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.config import DecodeConfig
from explorer.studies.contrastive.attribution import contrast_step
from explorer.studies.contrastive.foils import MAX_FOIL_CHARS, foil_from_id, foil_from_word, step_of
from explorer.decoding.translate import translate
from explorer.files.places import REPO_ROOT
from explorer.store.checkpoint import load_checkpoint
from support.numerics import EPS32, gradient_atol, model_atol

torch.set_num_threads(1)
SOURCE = "En el principio creó Dios los cielos y la tierra."


@pytest.fixture(scope="module")
def shipped():
    ckpt = load_checkpoint(REPO_ROOT / "checkpoints" / "bible-es-en")
    out = translate(ckpt.model, ckpt.tokenizer, SOURCE, DecodeConfig(beam_size=4), trace=True)
    trace = out.beam_trace
    row = trace.best_path()[3]                       # the 4th token of the best translation
    return ckpt, out, step_of(trace, row)


def test_the_step_is_read_from_the_beam_trace(shipped):
    _, out, step = shipped
    assert step.prefix == out.best.ids[:3] and step.chosen == out.best.ids[3]
    assert step.alternatives and all(t != step.chosen for t, _ in step.alternatives)
    lps = [lp for _, lp in step.alternatives]
    assert lps == sorted(lps, reverse=True)


def test_contrastive_integrated_gradients_are_complete_within_one_percent(shipped):
    ckpt, out, step = shipped
    foil = step.alternatives[0][0]
    result = contrast_step(ckpt.model, out.src_ids, step.prefix, step.chosen, foil, "integrated-gradients", 128)
    c = result.contrast
    assert c.completeness_error < 0.01, (c.total, c.value - c.baseline)
    assert abs(c.total - (c.value - c.baseline)) < 0.01 * abs(c.value - c.baseline)
    # the function is the difference of the two log-probs the search saw at that step: the search's step
    # shapes against one forward, so within model_atol (another step's log-probs differ by > 0.1)
    model = ckpt.model
    assert result.chosen_logprob == pytest.approx(out.best.token_logprobs[3], abs=model_atol(model, [-1.0]))
    assert result.foil_logprob == pytest.approx(step.alternatives[0][1], abs=model_atol(model, [-1.0]))
    # one float32 subtraction of those two numbers: within one rounding of the result
    assert c.value == pytest.approx(result.chosen_logprob - result.foil_logprob, abs=EPS32 * abs(c.value))
    assert result.plain.value == pytest.approx(result.chosen_logprob, abs=model_atol(model, [-1.0]))
    assert c.source.shape == (len(out.src_ids),) and c.target.shape == (len(step.prefix) + 1,)
    assert not np.allclose(c.source, result.plain.source)          # the contrast is not the plain attribution


def test_gradient_x_input_equals_the_gradient_taken_by_hand(shipped):
    """The second implementation: token vectors as leaves of the model's own forward, one backward."""
    ckpt, out, step = shipped
    model, foil = ckpt.model, step.alternatives[1][0]
    result = contrast_step(model, out.src_ids, step.prefix, step.chosen, foil, "grad-x-input")
    src = torch.tensor([out.src_ids])
    tgt_in = torch.tensor([[model.cfg.special.start] + step.prefix])
    enc, dec = model.encoder.embed, model.decoder.embed
    src_vec = (enc.lookup(src) * enc.scale).detach().requires_grad_()
    tgt_vec = (dec.lookup(tgt_in) * dec.scale).detach().requires_grad_()
    from explorer.inspection.hooks import intervene
    with intervene(model, {"encoder.embed.tokens": lambda _: src_vec, "decoder.embed.tokens": lambda _: tgt_vec}):
        memory, mask = model.encode(src)
        log_probs = model.generator(model.decode(tgt_in, memory, mask)[:, -1:])[0, 0]
    (log_probs[step.chosen] - log_probs[foil]).backward()
    by_hand = [(vec * vec.grad).sum(-1)[0].detach().numpy() for vec in (src_vec, tgt_vec)]
    # two backward passes through other shapes: within gradient_atol; a token's attribution in another's
    # place differs by far more
    atol = gradient_atol(model, *by_hand)
    np.testing.assert_allclose(result.contrast.source, by_hand[0], rtol=0, atol=atol)
    np.testing.assert_allclose(result.contrast.target, by_hand[1], rtol=0, atol=atol)


def test_batching_by_bytes_leaves_the_numbers_unchanged(shipped):
    ckpt, out, step = shipped
    foil = step.alternatives[0][0]
    whole = contrast_step(ckpt.model, out.src_ids, step.prefix, step.chosen, foil, "integrated-gradients", 8)
    one_row = contrast_step(ckpt.model, out.src_ids, step.prefix, step.chosen, foil, "integrated-gradients", 8,
                            budget=1)
    alone = contrast_step(ckpt.model, out.src_ids, step.prefix, step.chosen, foil, "integrated-gradients", 8,
                          plain=False)
    model = ckpt.model                                  # other batch shapes: other orders of the same sums
    assert alone.plain is None
    assert alone.chosen_logprob == pytest.approx(whole.chosen_logprob, abs=model_atol(model, [-1.0]))
    for a, b in ((whole.contrast, one_row.contrast), (whole.plain, one_row.plain), (whole.contrast, alone.contrast)):
        atol = gradient_atol(model, a.source, a.target)
        np.testing.assert_allclose(b.source, a.source, rtol=0, atol=atol)
        np.testing.assert_allclose(b.target, a.target, rtol=0, atol=atol)


def test_a_typed_word_contrasts_its_first_piece_and_says_so(shipped):
    ckpt, _, step = shipped
    tok, model = ckpt.tokenizer, ckpt.model
    one = foil_from_word(model, tok, "Lord", step.chosen)
    assert one.pieces == tuple(tok.encode("Lord", side="tgt")) and one.token == one.pieces[0] and not one.note
    word = "antidisestablishmentarianism"
    many = foil_from_word(model, tok, f"  {word} ", step.chosen)
    assert len(many.pieces) > 3 and many.token == many.pieces[0]
    assert f"{len(many.pieces)} pieces" in many.note and "first" in many.note


@pytest.mark.parametrize("word,message", [
    ("", "empty"), ("   ", "empty"), ("two words", "one word"), ("x" * (MAX_FOIL_CHARS + 1), "at most"),
    ("Жизнь", "does not know"), ("\u4e16\u754c", "does not know"),
    ("<b>\U0001F600</b>", "does not know")])               # a lone word boundary, then the unknown piece
def test_hostile_typed_foils_are_refused_with_a_message(shipped, word, message):
    ckpt, _, step = shipped
    with pytest.raises(ValueError, match=message):
        foil_from_word(ckpt.model, ckpt.tokenizer, word, step.chosen)


def test_hostile_foil_ids_are_refused_with_a_message(shipped):
    ckpt, _, step = shipped
    model, tok = ckpt.model, ckpt.tokenizer
    special = model.cfg.special
    for bad, message in ((-1, "outside"), (model.cfg.tgt_vocab_size, "outside"), (special.pad, "never writes"),
                         (special.start, "never writes"), (True, "whole number"), ("7", "whole number"),
                         (step.chosen, "chosen token itself")):
        with pytest.raises(ValueError, match=message):
            foil_from_id(model, bad, step.chosen, tok)
    chosen_word = tok.id_to_piece(step.chosen, "tgt").lstrip("\u2581")
    if chosen_word and tok.encode(chosen_word, side="tgt")[:1] == [step.chosen]:
        with pytest.raises(ValueError, match="chosen token"):
            foil_from_word(model, tok, chosen_word, step.chosen)
    with pytest.raises(ValueError, match="steps"):
        contrast_step(model, [5, 3], [], step.chosen, 7, "integrated-gradients", 0)
    with pytest.raises(ValueError, match="method"):
        contrast_step(model, [5, 3], [], step.chosen, 7, "saliency")


def test_the_reference_fall_reads_the_pages_own_translation_and_trace(shipped):
    """translate(..., trace=True) is what the Beam search page holds: given its trace and best output,
    reference_fall finds what it finds when it runs the search itself."""
    from explorer.studies.contrastive.fall import MODEL_ERROR, SEARCH_ERROR, reference_fall
    from explorer.text.encoding import output_ids

    ckpt, out, _ = shipped
    ref = output_ids(ckpt.tokenizer, "In the beginning God created the heavens and the earth.", 256,
                     ckpt.model.cfg.special)
    cfg = DecodeConfig(beam_size=4)
    given = reference_fall(ckpt.model, out.src_ids, ref, cfg, trace=out.beam_trace, output=out.best)
    alone = reference_fall(ckpt.model, out.src_ids, ref, cfg)
    assert given == alone and given.verdict in (SEARCH_ERROR, MODEL_ERROR)
    assert given.output == out.best.ids and given.reference == ref
    parted = next(i for i, (a, b) in enumerate(zip(ref, out.best.ids)) if a != b)
    assert given.step is not None and given.step >= parted        # kept at least while it was the output's prefix
