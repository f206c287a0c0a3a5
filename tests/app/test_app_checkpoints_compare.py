"""The Checkpoints page's "Compare two" across two language pairs: said, not scored in silence."""
from __future__ import annotations

from support.app_support import no_exception, open_app, texts


def test_two_language_pairs_and_pieces_a_model_cannot_write_are_said():
    """Comparing an es->en model with an en->de one showed B's -11.67 for 'God said,' with nothing saying
    it was the score of <unk>, and B's BLEU on A's test set with nothing saying B translates another pair."""
    at = open_app("bible-es-en", "webapp/pages/checkpoints.py", text="Y dijo Dios",
                  query={"tab": "Compare two", "a": "bible-es-en", "b": "numbers-en-de"})
    no_exception(at)
    warning = texts(at.warning)
    assert "A translates es → en and B en → de" in warning, warning
    captions = texts(at.caption)
    assert "B cannot write" in captions and "scored as its unknown piece" in captions, captions


def test_one_language_pair_is_compared_without_that_warning():
    at = open_app("numbers-en-de", "webapp/pages/checkpoints.py", text="three hundred",
                  query={"tab": "Compare two", "a": "numbers-en-de", "b": "numbers-en-de-step150"})
    no_exception(at)
    assert "A translates" not in texts(at.warning)
