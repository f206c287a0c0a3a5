"""The app's one-sentence faithfulness (attribution_faithfulness) is the scorecard's measure of one sentence:
with a method's scores it gives the sentence's own value of the scorecard's table (its random baseline too);
a word's pieces are removed or kept together; a contrast with a foil is the chosen token's measure minus the
foil's under the same edits; a row stands for every position; what it cannot read is refused with a message."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.studies.contributions.faithfulness import (FaithfulnessSettings, attribution_faithfulness, edited,
                                                         forced_logprobs, k_of, method_scores, sentence_faithfulness)
from support.model_helpers import make_model
from support.numerics import model_atol

SRC, OUT = [5, 9, 12, 7, 30, 6, 3], [11, 4, 17, 8, 3]
UNK = 1


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return make_model()


def atol(model) -> float:
    """A measure is a difference of two log-probs, each scored in other batch rows: twice model_atol."""
    return 2 * model_atol(model, [-1.0])


def test_a_methods_scores_give_the_scorecards_value_of_the_sentence(model):
    settings = FaithfulnessSettings(methods=("alti", "attention-mean"), seeds=2)
    card = sentence_faithfulness(model, SRC, OUT, settings)                 # what the scorecard's table averages
    scores = method_scores(model, SRC, OUT, settings.methods, settings.ig_steps)
    one = attribution_faithfulness(model, SRC, OUT, scores, settings=settings)
    for measure in ("comprehensiveness", "sufficiency"):
        for name in settings.methods:
            assert abs(one["rankings"][name][measure] - card[name][measure].mean()) < atol(model), (name, measure)
        baseline = np.mean([card[f"random-{s}"][measure].mean() for s in range(2)])
        assert abs(one["random"][measure] - baseline) < atol(model), measure
        assert len(one["random"]["seeds"]) == 2
    assert one["k"] == [k_of(len(SRC) - 1, f) for f in settings.fractions] == [1, 1, 3]
    assert one["units"] == len(SRC) - 1 and one["positions"] == list(range(len(OUT))) and one["measured"] == "log p"


def test_a_words_pieces_go_together_and_a_row_stands_for_every_position(model):
    groups = [[0], [1, 2], [3, 4], [5]]                                      # four words, two of two pieces
    row = np.array([0.1, 0.9, 0.5, 0.0])                                    # the second word ranks first
    settings = FaithfulnessSettings(methods=(), fractions=(0.25,), seeds=1)   # k = 1 word of 4
    one = attribution_faithfulness(model, SRC, OUT, {"why": row}, positions=[2, 3], groups=groups, settings=settings)
    full = forced_logprobs(model, [tuple(SRC)] * 2, OUT, [2, 3], 8)
    removed = forced_logprobs(model, [edited(SRC, [1, 2], False, UNK)] * 2, OUT, [2, 3], 8)
    kept = forced_logprobs(model, [edited(SRC, [1, 2], True, UNK)] * 2, OUT, [2, 3], 8)
    assert abs(one["rankings"]["why"]["comprehensiveness"] - np.mean(np.subtract(full, removed))) < atol(model)
    assert abs(one["rankings"]["why"]["sufficiency"] - np.mean(np.subtract(full, kept))) < atol(model)
    whole = attribution_faithfulness(model, SRC, OUT, {"why": np.tile(row, (len(OUT), 1))}, positions=[2, 3],
                                     groups=groups, settings=settings)
    for measure in ("comprehensiveness", "sufficiency"):                     # the same edits, the same rows
        assert abs(whole["rankings"]["why"][measure] - one["rankings"]["why"][measure]) < atol(model)
    assert one["units"] == 4 and one["k"] == [1]
    # one piece of the word alone is another edit: the groups are what is removed
    alone = attribution_faithfulness(model, SRC, OUT, {"why": np.array([0.1, 0.9, 0.5, 0.0, 0.0, 0.0])},
                                     positions=[2, 3], settings=FaithfulnessSettings(methods=(), fractions=(1 / 6,),
                                                                                     seeds=1))
    assert abs(alone["rankings"]["why"]["comprehensiveness"] - one["rankings"]["why"]["comprehensiveness"]) > atol(model)


def test_a_contrast_is_the_chosen_tokens_measure_minus_the_foils(model):
    foil, t = 21, 3
    scores = {"c": np.array([0.0, 1.0, 0.2, 0.8, 0.1, 0.3])}
    settings = FaithfulnessSettings(methods=(), seeds=1)
    contrast = attribution_faithfulness(model, SRC, OUT, scores, positions=[t], foil=foil, settings=settings)
    chosen = attribution_faithfulness(model, SRC, OUT, scores, positions=[t], settings=settings)
    other = attribution_faithfulness(model, SRC, OUT[:t] + [foil] + OUT[t + 1:], scores, positions=[t],
                                     settings=settings)
    for measure in ("comprehensiveness", "sufficiency"):
        for part in (lambda r: r["rankings"]["c"], lambda r: r["random"]):
            want = part(chosen)[measure] - part(other)[measure]
            assert abs(part(contrast)[measure] - want) < 2 * atol(model), measure
    assert contrast["measured"] == "contrast"
    assert abs(contrast["rankings"]["c"]["comprehensiveness"] - chosen["rankings"]["c"]["comprehensiveness"]) > atol(model)


@pytest.mark.parametrize("kwargs, says", [
    (dict(scores={"random-0": np.zeros(6)}), "baseline"),
    (dict(scores={"a": np.zeros(3)}), "do not cover"),
    (dict(scores={"a": np.zeros((2, 6))}), "do not cover"),
    (dict(scores={"a": np.zeros(6)}, positions=[9]), "output positions"),
    (dict(scores={"a": np.zeros(6)}, positions=[1, 2], foil=21), "one output position"),
])
def test_what_it_cannot_read_is_refused(model, kwargs, says):
    scores = kwargs.pop("scores")
    with pytest.raises(ValueError, match=says):
        attribution_faithfulness(model, SRC, OUT, scores, **kwargs)
