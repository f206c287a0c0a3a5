"""The trainer's last log line (train.log): a fine-tune on 3-word pairs ended "best dev BLEU 0.00" with no
word of why, although the eval lines above it had chrF 100. The line now gives the best chrF beside the best
BLEU and, when BLEU is 0 beside a chrF above 0, the reason (explorer.training.notes, where the eval lines'
note comes from). Checked on Trainer._summary itself, without training a model."""
from __future__ import annotations

from types import SimpleNamespace

from explorer.evaluation.scores import corpus_scores
from explorer.training.trainer import Trainer

SHORT = ["drei und zwanzig", "vier zehn", "neun"]


def summary(best: dict, references=SHORT, eval_sentences: int = 100) -> str:
    trainer = object.__new__(Trainer)                  # no setup: only what _summary reads
    trainer.best, trainer.step, trainer.total_steps, trainer.epoch = best, 30, 30, 2
    trainer.run_dir = "runs/short"
    trainer.dev_split = SimpleNamespace(tgt_text=list(references))
    trainer.cfg = SimpleNamespace(eval_sentences=eval_sentences)
    return trainer._summary("finished", 12.4)


def test_a_best_bleu_of_0_beside_chrf_says_why_on_the_last_line():
    scores = corpus_scores(SHORT, SHORT)                                    # perfect 3-word outputs
    assert (scores["bleu"], scores["chrf"]) == (0.0, 100.0)
    line = summary({"bleu": scores["bleu"], "step": 10, "chrf": scores["chrf"], "chrf_step": 20})
    assert line.startswith("finished: step 30/30, epoch 2, 12s, best dev BLEU 0.00 at step 10, "
                           "best dev chrF 100.00 at step 20 (BLEU is 0 by construction")
    assert "100% of the dev references are" in line and line.endswith(", run dir runs/short")


def test_a_best_bleu_above_0_gets_chrf_and_no_excuse():
    line = summary({"bleu": 31.5, "step": 20, "chrf": 55.25, "chrf_step": 30})
    assert "best dev BLEU 31.50 at step 20, best dev chrF 55.25 at step 30, run dir" in line
    assert "by construction" not in line


def test_without_chrf_or_an_eval_the_line_is_as_before():
    """A run resumed from a checkpoint saved before chrF was kept, and a run that never evaluated."""
    from explorer.training.notes import best_dev_text

    assert "best dev BLEU 0.00 at step 10, run dir" in summary({"bleu": 0.0, "step": 10, "chrf": None,
                                                              "chrf_step": None})
    assert summary({"bleu": -1.0, "step": None, "chrf": None, "chrf_step": None}) == \
        "finished: step 30/30, epoch 2, 12s, run dir runs/short"
    assert best_dev_text(0.0, 5, 40.0, 5).endswith("has no 4-gram; chrF measures them)")   # no references given
