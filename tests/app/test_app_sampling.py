"""The Translate page's sampling: settings past what the model has, and samples drawn more than once."""
from __future__ import annotations

from support.app_support import no_exception, open_app, texts


def test_samples_past_the_vocabulary_and_repeated_ones_are_said_as_they_are():
    """top-k 100 on a 62-piece model showed one error box per sample and no translation; ten identical
    samples were captioned 'all of them are ranked below' over a table of one, with the last seed."""
    at = open_app("numbers-en-de", text="three hundred",
                  query={"dec": "sample", "topk": 100, "samples": 10, "temp": 0.1, "seed": 5})
    no_exception(at)
    assert not at.error, texts(at.error)
    table = at.dataframe[0].value
    caption = texts(at.caption)
    assert 1 <= len(table) < 10                              # at temperature 0.1, samples repeat
    assert f"the {len(table)} different ones are ranked below, each with the first seed that drew it" in caption
    assert f"({10 - len(table)} drew a translation drawn before)" in caption
    assert "all of them are ranked below" not in caption
    assert min(table["seed"]) == 5                           # the first seed that drew the best one, not the last


def test_a_minimum_length_past_the_length_limit_is_said():
    """minlen=4096&maxlen=1 cut every output with only 'cut at the length limit': nothing said the end was
    never allowed."""
    at = open_app("numbers-en-de", text="three hundred", query={"minlen": 4096, "maxlen": 1, "dec": "greedy"})
    no_exception(at)
    assert "the model was never allowed to end it" in texts(at.caption)
    at = open_app("numbers-en-de", text="three hundred", query={"dec": "greedy"})
    assert "never allowed" not in texts(at.caption)
