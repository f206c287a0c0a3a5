"""Training vs inference (explorer.decoding.side_by_side): teacher forcing the model's own greedy
output gives greedy's own log-probabilities within 1e-5, with this project's special ids and with
Marian's; a reference that differs gives disagreements; plus the page's helpers: the figures, the
words a tokenizer cuts into many pieces, and the test pair the Translate page opens on."""
from __future__ import annotations

import numpy as np
import torch
import pytest

from support.decoding_helpers import StandInTokenizer, random_model, trained  # noqa: F401 (fixture)
from explorer.config import DecodeConfig
from explorer.decoding import greedy_search
from explorer.decoding.side_by_side import side_by_side
from explorer.decoding.teacher import forced_choices
from explorer.evaluation.showcase import best_translated
from explorer.plots.forcing import causal_mask_figure, rows_figure
from explorer.text.encoding import decoder_inputs
from explorer.text.word_pieces import HEAVY_SPLIT, heavily_split, word_pieces
from test_special_ids import MARIAN
from support.numerics import model_atol

TEXT = "a b c d e f"
TOKENS = StandInTokenizer()


def models():
    return [pytest.param(random_model(), id="default-ids"),
            pytest.param(random_model(final_logits_bias=True, **MARIAN), id="marian-ids")]


@pytest.mark.parametrize("model", models())
@pytest.mark.parametrize("max_len_b", [3, 50])           # cut at the length limit (no EOS), and free to end
def test_teacher_forcing_the_own_output_gives_the_step_by_step_numbers(model, max_len_b):
    cfg = DecodeConfig(strategy="greedy", max_len_b=max_len_b)
    result = side_by_side(model, TOKENS, TEXT, cfg=cfg)
    forced, steps = result.forced, result.steps
    assert result.own_output and forced.outputs == steps.outputs             # forced exactly as written
    src = TOKENS.encode(TEXT) + [model.cfg.eos_id]
    assert steps.outputs == greedy_search(model, [src], cfg)[0].best.ids     # step by step is greedy itself
    # one pass over all positions against one step at a time: other shapes, so other orders of the same
    # sums (a wrong mask or cache moves a log-prob by > 1e-2)
    atol = model_atol(model, steps.logprobs)
    assert np.allclose(forced.logprobs, steps.logprobs, atol=atol, rtol=0)
    assert result.max_difference <= atol and result.first_divergence is None
    assert all(forced.agree)                                                 # its own pick at every position
    special = model.cfg.special
    assert forced.inputs == steps.inputs == decoder_inputs(steps.outputs, special)
    assert forced.inputs[0] == special.start and forced.inputs[1:] == forced.outputs[:-1]   # shifted right
    assert result.finished == (steps.outputs[-1] == special.eos)
    assert len(forced.input_pieces) == len(forced.output_pieces) == len(forced.top_pieces) == len(forced.outputs)


@pytest.mark.parametrize("model", models())
def test_a_reference_that_differs_disagrees_somewhere(model):
    own = side_by_side(model, TOKENS, TEXT).steps.outputs
    reference = "s s s s" if TOKENS.encode("s")[0] not in own else "a a a a"
    result = side_by_side(model, TOKENS, TEXT, reference)
    forced = result.forced
    assert not result.own_output and result.max_difference is None
    assert forced.outputs == TOKENS.encode(reference) + [model.cfg.eos_id]  # the reference + EOS is forced
    assert not all(forced.agree) and result.first_divergence is not None
    assert forced.inputs == decoder_inputs(forced.outputs, model.cfg.special)
    scored, top_ids, _ = forced_choices(model, TOKENS.encode(TEXT) + [model.cfg.eos_id], forced.outputs)
    assert scored.token_logprobs == pytest.approx(forced.logprobs, abs=model_atol(model, forced.logprobs))
    assert top_ids == forced.top_ids


def test_a_trained_model_agrees_with_the_right_reference(trained):  # noqa: F811
    result = side_by_side(trained, TOKENS, "a b c d", "d c b a")
    assert all(result.forced.agree) and result.first_divergence is None
    assert result.steps.outputs == result.forced.outputs


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_text_is_an_empty_result(text):
    result = side_by_side(random_model(), TOKENS, text)
    assert result.forced is None and result.steps is None and result.reason


def test_the_causal_mask_hides_later_positions():
    z = np.asarray(causal_mask_figure(["<s>", "a", "b"]).data[0].z)
    assert (z == np.triu(np.ones((3, 3)), k=1)).all()


def test_the_rows_figure_puts_each_input_under_its_output():
    fig = rows_figure(["<s>", "a"], ["a", "</s>"], [-0.1, -2.0], ["a", "b"], [True, False])
    reads, scored, picks = fig.data
    assert list(reads.text[0]) == ["&lt;s&gt;", "a"] and list(scored.text[0]) == ["a", "&lt;/s&gt;"]
    assert np.allclose(scored.z[0], np.exp([-0.1, -2.0])) and list(picks.z[0]) == [1.0, 0.0]
    with pytest.raises(ValueError):
        rows_figure(["<s>"], ["a", "b"], [0.0, 0.0])


class CharTokenizer:
    """One piece per character, the first marked as a word start; punctuation gets its own piece."""

    def encode(self, text, side="src"):
        return [ord(c) for c in text.replace(" ", "")]

    def id_to_piece(self, i, side="tgt"):
        return chr(i)


def test_heavily_split_words_are_named_punctuation_not_counted():
    words = word_pieces(CharTokenizer(), "ab abcd, abc,. abcd")
    assert [w.word for w in words] == ["ab", "abcd,", "abc,.", "abcd"]
    assert [w.n_word_pieces for w in words] == [2, 4, 3, 4]
    heavy = heavily_split(CharTokenizer(), "ab abcd, abc,. abcd")
    assert [w.word for w in heavy] == ["abcd,", "abcd"] and HEAVY_SPLIT == 4
    assert heavily_split(CharTokenizer(), "") == []


def test_the_showcase_is_the_best_translated_pair(trained):  # noqa: F811
    pairs = [("a b c", ""),                 # no reference: never chosen
             ("a b c", "s s s"),            # a wrong reference: low chrF
             ("d e f g", "g f e d"),        # the right one
             ("h i", "i h")]                # right too, but later: the earlier wins a tie
    found = best_translated(trained, TOKENS, pairs)
    assert found.index == 2 and found.chrf == pytest.approx(100.0) and found.translation == "g f e d"
    assert best_translated(trained, TOKENS, pairs, n=1).index == 1          # only the first usable pair
    assert best_translated(trained, TOKENS, [("a", ""), ("", "b")]) is None


@pytest.mark.parametrize("name", ["numbers-en-de", "bible-es-en"])
def test_the_pages_rounding_bound_tells_rounding_from_a_wrong_mask(name):
    """The Training vs inference page calls the two runs "the same numbers" within model_atol (float32
    rounding on any kernel): the difference the shipped models show is far below it, and what a decoder
    that reads one token too many gives (a causal mask off by one) is far above it."""
    from explorer.decoding.core import special_ids
    from explorer.files.places import REPO_ROOT
    from explorer.model.rounding import model_atol
    from explorer.store.checkpoint import load_checkpoint
    from explorer.text.encoding import source_ids

    ckpt = load_checkpoint(REPO_ROOT / "checkpoints" / name)
    model, text = ckpt.model, "In the beginning" if name == "bible-es-en" else "three hundred and twenty one"
    result = side_by_side(model, ckpt.tokenizer, text)
    bound = model_atol(model, result.forced.logprobs)
    assert result.max_difference <= bound
    # the mask off by one: teacher forcing where each position also sees the token it predicts
    src = torch.tensor([source_ids(ckpt.tokenizer, text, model.cfg.max_len, special_ids(model))])
    ids = result.forced.outputs
    inputs = torch.tensor([ids])                                      # the outputs themselves, not shifted
    with torch.no_grad():
        logprobs = model(src, inputs)[0, torch.arange(len(ids)), torch.tensor(ids)]           # [T]
    assert max(abs(a - float(b)) for a, b in zip(result.forced.logprobs, logprobs)) > 10 * bound
