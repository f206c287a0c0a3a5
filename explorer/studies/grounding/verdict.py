"""The verdict on one source sentence: how unlike its training data it reads, whether it reads as the
model's other language, and whether its translation is therefore a guess.

The score is the sentence's mean surprise to the training data, in nats per word: each word's negative
log-probability under a bigram model of the training split's source side (counts from
explorer.studies.grounding.index; Witten-Bell interpolation of the bigram with an add-1/2 unigram, so a word the
data never showed costs most, a known word in a never-seen neighbourhood less, a common phrase least).
Names (capitalised words inside a sentence: words.names) are left out: a model copies a name it never
saw, and a new name in a test verse is no sign that the verse is unlike the training data. Measured on
everyday Spanish against held-out Bible verses (`python -m benchmarks grounding`, docs/GROUNDING.md),
this separated them better than the share of unseen words or the model's own log-probability.

A sentence is called a guess when its score is above the checkpoint's threshold, calibrated on held-out
pairs the index never counted (calibrate: the QUANTILE of their scores, so about 1 in 10 held-out pairs
is called a guess; in a closed domain such as the numbers, whose training words cover every held-out
sentence, their highest score). It reads as the target language when, of its words the training data
shows at all, at least half (two or more) occur far more often on the target side than on the source
side (LANGUAGE_RATIO): English typed into a Spanish -> English model is named as English, whatever the
model makes of it.

A sentence that is no guess as a whole but of whose words, names left out, at least PARTLY_SHARE the
training data never shows is called partly a guess: the whole may read like the training data, but
what the model writes for those words it was never shown ("¿Dónde está la estación?" -> "Where is the
portion?": three Bible words and a station it never saw).

Given the translation too, each of its words is marked when no word of the source brings it along in the
training data (links.py): the words the model made up.

With the checkpoint's encoder-state map (states.py), a second signal joins the first: how far the
sentence's pieces lie from the training pieces' encoder states. Each signal is standardised by the
held-out sentences' mean and spread, the two are added (STATES_WEIGHT), and the sentence is a guess when
the sum is above the held-out sentences' STATES_QUANTILE (calibrate_states). The map depends on the
weights, the counts on the data only, so a checkpoint without a map (not shipped, not built yet) keeps
the first signal alone, with its own threshold.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from explorer.studies.grounding.index import TrainingIndex
from explorer.studies.grounding.links import OutputWord, output_words
from explorer.studies.common.words import names, words

RARE = 3                  # seen fewer times than this: rare
QUANTILE = 0.90           # of the held-out pairs' scores: the threshold
STATES_WEIGHT = 1.0       # the encoder-state distance's weight beside the surprise (both standardised): equal
STATES_QUANTILE = QUANTILE   # of the held-out pairs' combined signals: the threshold with a state map
PARTLY_SHARE = 0.2        # never-seen words (names left out) at least this share of the words: partly a guess
LANGUAGE_RATIO = 5.0      # a word "of the target language": target count > this x (source count + 1)
NAMES = {"es": "Spanish", "en": "English", "de": "German", "fr": "French", "it": "Italian", "pt": "Portuguese"}


@dataclass(frozen=True)
class Word:
    word: str
    count: int            # occurrences in the training pairs' source side
    seen: str             # "never", "rare" or "often"


@dataclass(frozen=True)
class Verdict:
    source: str
    words: tuple[Word, ...]
    score: float          # mean surprise, nats per word: low for text like the training data
    threshold: float | None   # of what decided: `combined` when there is one (threshold_of), else `score`
    guessing: bool | None     # None when the index has no calibrated threshold
    other_language: str | None    # the target language's name when the text reads as it, else None
    summary: str          # one plain sentence for the audience
    output: tuple[OutputWord, ...] = ()      # the translation's words, marked or linked (given an output)
    distance: float | None = None     # mean distance of its pieces from the training pieces' encoder states
    combined: float | None = None     # the two signals standardised and added (with a state map)
    unknown: tuple[str, ...] = ()     # its words the training data never shows, names left out
    partly: bool = False      # no guess as a whole, but PARTLY_SHARE or more of its words never seen

    def to_json(self) -> dict:
        out = asdict(self)
        out["words"] = [asdict(w) for w in self.words]
        out["output"] = [asdict(w) for w in self.output]
        out["threshold_of"] = "score" if self.combined is None else "combined"   # a reader compares like with like
        return out


def _seen(count: int) -> str:
    return "never" if count == 0 else "rare" if count < RARE else "often"


def score(index: TrainingIndex, text: str) -> float:
    """The sentence's mean surprise to the training data in nats per word (the module docstring); 0 for
    text with no words but names."""
    tokens, named = words(text), names(text)
    model = index.bigram_model()
    surprise = []
    for i, word in enumerate(tokens):
        if i in named:
            continue
        previous = tokens[i - 1] if i > 0 and i - 1 not in named else None
        surprise.append(-math.log(model.probability(previous, word)))
    return float(np.mean(surprise)) if surprise else 0.0


def other_language(index: TrainingIndex, text: str) -> str | None:
    """The target language's name when the text reads as it: of its words the training data shows on
    either side (a word it never shows is evidence of neither), at least half, and two or more, are
    far more often on the target side."""
    known = [w for w in words(text) if index.src_words.get(w, 0) or index.tgt_words.get(w, 0)]
    foreign = [w for w in known if index.tgt_words.get(w, 0) > LANGUAGE_RATIO * (index.src_words.get(w, 0) + 1)]
    if len(foreign) >= 2 and len(foreign) >= len(known) / 2:
        return NAMES.get(index.tgt_lang or "", index.tgt_lang or "the target language")
    return None


def _all_seen(index: TrainingIndex, text: str) -> bool:
    named = names(text)
    return all(index.src_words.get(w, 0) for i, w in enumerate(words(text)) if i not in named)


def calibrate(index: TrainingIndex, held_out: list[str], source: str = "held-out pairs") -> TrainingIndex:
    """Set the index's threshold from the held-out sources' scores (they were never counted): their
    QUANTILE; or, in a closed domain where the training words cover every held-out sentence (the numbers),
    their highest score, so that no sentence the data covers is called a guess. The calibration record
    says which, on what and how many, and what share of them lies above the threshold."""
    scores = np.array([score(index, s) for s in held_out], dtype=float)
    if not len(scores):
        raise ValueError("no held-out sentences to calibrate the threshold on")
    closed = all(_all_seen(index, s) for s in held_out)
    threshold = float(scores.max() if closed else np.quantile(scores, QUANTILE))
    index.threshold = round(threshold, 6)
    index.calibration = {"on": source, "held_out": int(len(scores)),
                         "rule": "highest held-out score (closed vocabulary)" if closed else f"quantile {QUANTILE}",
                         "above": round(float((scores > index.threshold).mean()), 4)}
    return index


def combine(calibration: dict, surprise: float, distance: float) -> float:
    """The two signals, each standardised by the held-out sentences' mean and spread, added."""
    return ((surprise - calibration["score_mean"]) / calibration["score_std"]
            + STATES_WEIGHT * (distance - calibration["distance_mean"]) / calibration["distance_std"])


def calibrate_states(index: TrainingIndex, held_out: list[str], distances: list[float],
                     source: str = "held-out pairs") -> dict:
    """The state map's calibration from the held-out sentences' two signals: their means and spreads, and
    the threshold: the STATES_QUANTILE of their combined signal, or in a closed domain (as calibrate) its
    highest value."""
    scores = np.array([score(index, s) for s in held_out], dtype=float)
    dist = np.array(distances, dtype=float)
    if len(scores) < 2 or len(scores) != len(dist):
        raise ValueError("need two or more held-out sentences, each with its distance, to calibrate on")
    cal = {"on": source, "held_out": int(len(scores)), "score_mean": float(scores.mean()),
           "score_std": float(max(scores.std(), 1e-6)), "distance_mean": float(dist.mean()),
           "distance_std": float(max(dist.std(), 1e-6)), "weight": STATES_WEIGHT}
    combined = np.array([combine(cal, a, b) for a, b in zip(scores, dist)])
    closed = all(_all_seen(index, s) for s in held_out)
    cal["rule"] = "highest held-out value (closed vocabulary)" if closed else f"quantile {STATES_QUANTILE}"
    cal["threshold"] = round(float(combined.max() if closed else np.quantile(combined, STATES_QUANTILE)), 6)
    cal["above"] = round(float((combined > cal["threshold"]).mean()), 4)
    return cal


def verdict(index: TrainingIndex, text: str, model_name: str = "this model", output: str | None = None,
            distance: float | None = None, calibration: dict | None = None) -> Verdict:
    """The verdict on `text` (see the module docstring); with its translation `output`, that output's
    words marked or linked; with its encoder-state `distance` and the state map's `calibration`, on both
    signals."""
    tokens = words(text)
    marks = tuple(Word(w, index.src_words.get(w, 0), _seen(index.src_words.get(w, 0))) for w in tokens)
    value = score(index, text)
    guessing = None if index.threshold is None else value > index.threshold
    both = None
    if distance is not None and calibration and "threshold" in calibration:
        both = combine(calibration, value, distance)
        guessing = both > calibration["threshold"]
    foreign = other_language(index, text)
    never = sum(w.seen == "never" for w in marks)
    where = f"the {index.pairs:,} training pairs of {model_name}"
    named = names(text)
    unseen = [m.word for i, m in enumerate(marks) if i not in named and m.seen == "never"]
    weighed = sum(1 for i in range(len(tokens)) if i not in named)
    partly = not foreign and not guessing and bool(unseen) and len(unseen) >= PARTLY_SHARE * weighed
    unknown = tuple(dict.fromkeys(unseen))                      # each once, in the sentence's order
    if foreign:
        source = NAMES.get(index.src_lang or "", index.src_lang or "its source language")
        summary = f"This reads as {foreign}; {model_name} reads {source}: its output is a guess."
        guessing = True
    elif not tokens:
        summary = "The text has no words the training data could have shown."
    elif partly:                                # counted as the rule counts them: names left out
        verb = "appears" if len(unseen) == 1 else "appear"
        times = {w: unseen.count(w) for w in unknown}            # the count is of words, the list of each once
        shown = ", ".join(f"'{w}'" + (f" ({times[w]} times)" if times[w] > 1 else "") for w in unknown)
        left_out = ", names left out," if named else ""
        summary = (f"{len(unseen)} of {weighed} words{left_out} never {verb} in {where}: what the model writes "
                   f"for {shown} is a guess, though the rest reads like its training data.")
    elif never:
        verb = "appears" if never == 1 else "appear"
        summary = (f"{never} of {len(tokens)} words never {verb} in {where}"
                   + (": this translation is a guess." if guessing else "."))
    elif guessing:
        how = "the model reads it unlike its training sentences" if both is not None else "not in these combinations"
        summary = f"Every word appears in {where}, but {how}: this translation is a guess."
    else:
        rarest = min(marks, key=lambda w: w.count)
        summary = (f"Every word appears in {where} (the rarest, '{rarest.word}', {rarest.count:,} times): "
                   "the model has seen text like this.")
    linked = output_words(index.links, index.src_verses, index.glue(), text, output) if output else ()
    return Verdict(source=text, words=marks, score=round(value, 6),
                   threshold=index.threshold if both is None else calibration["threshold"],
                   guessing=guessing, other_language=foreign, summary=summary, output=linked,
                   distance=None if distance is None else round(distance, 6),
                   combined=None if both is None else round(both, 6), unknown=unknown, partly=partly)
