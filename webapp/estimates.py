"""How long a study will take on this machine, said before it starts: a small piece of the study's own
work, timed once per checkpoint weights on the shared model, times the work the library counts.

Why: the Heads page's cost ("36 heads x 20 sentences: 39 teacher-forced batch passes ... 84 greedy
decodes") says what runs but not for how long (20 Bible sentences took ~2-3 minutes, so the default 200
is about half an hour), and the Alignment scorecard said nothing. A rate measured here is this machine's,
at the app's torch thread count (the one the job runs at), with whatever else the machine is doing then.

- Head lab: one greedy decode of the first LAB_SENTENCES held-out sentences with the full model and one
  with every other head removed (a pruning curve's decodes lie between the two, and a removed head
  lengthens outputs), and one teacher-forced loss pass over them; times explorer.studies.heads.job.Cost:
  every decode of the set counted whole (a single head's removal first checks, and decodes again only
  the sentences it changes: that part may go faster), every teacher-forced batch at most 32 sentences,
  a backward pass as about 2 forward ones.
- Scorecard: the attention aligners on the first ALIGN_PAIRS gold pairs, and on the first of them
  gradient x input and integrated gradients at IG_PROBE points (per point); times the pairs and the
  points the settings ask for. eflomal is not timed (it learns from the training corpus: the page says
  how long it takes).
Each timed call runs once untimed first (the first call of a kind pays one-off costs). Every measurement
holds a place in the model's queue (models.model_slot) like any other use of the shared model.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import streamlit as st

from webapp import models
from webapp.text_safety import md_escape

LAB_SENTENCES = 16                  # the head lab's timed sentences (the lab decodes in batches of 32)
TEACHER_BATCH = 32                  # the lab's teacher-forced loss batches (its statistics': 16)
BACKWARD = 3                        # a batch with its backward pass, in forward passes
ALIGN_PAIRS = 4                     # the scorecard's pairs timed for the attention aligners
IG_PROBE = 4                        # integrated gradients' points in the timed run


@dataclass(frozen=True)
class LabRates:
    sentences: int                  # how many held-out sentences were timed
    decode: float                   # seconds per sentence of a greedy decode (full model and pruned, mean)
    forward: float                  # seconds per sentence of a teacher-forced loss pass


@dataclass(frozen=True)
class AlignRates:
    pairs: int                      # how many gold pairs the attention aligners were timed on
    attention: float                # seconds per pair: every attention aligner
    gradient: float                 # seconds per pair: gradient x input
    ig_point: float                 # seconds per pair and integrated-gradients point


def _timed(fn) -> float:
    fn()                                                          # one-off costs go to a first, untimed call
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@st.cache_data(max_entries=8, show_spinner="Timing a few sentences to estimate how long it takes…")
def lab_rates(ckpt_path: str, sha: str, _pairs: list) -> LabRates:
    """The head lab's rates on this checkpoint (`sha`: new weights are timed again; `_pairs`: its held-out
    pairs, read by the page)."""
    import torch

    from explorer.studies.common.sentences import build_sentences, greedy_ids
    from explorer.studies.heads.importance import all_heads, teacher_loss

    ckpt = models.load(ckpt_path)
    model = ckpt.model
    with models.model_slot(), torch.no_grad():
        sents = build_sentences(model, ckpt.tokenizer, _pairs, LAB_SENTENCES)
        n = len(sents)
        half = all_heads(model)[::2]
        full = _timed(lambda: greedy_ids(model, sents.src))
        pruned = _timed(lambda: greedy_ids(model, sents.src, half))
        forward = _timed(lambda: teacher_loss(model, sents))
    return LabRates(n, (full + pruned) / 2 / n, forward / n)


def lab_seconds(rates: LabRates, cost) -> float:
    """The head lab's seconds at these rates for a Cost (explorer.studies.heads.job.estimate_cost)."""
    decodes = cost.decodes * cost.sentences * rates.decode
    batch = min(cost.sentences, TEACHER_BATCH)
    teacher = (cost.forward_passes + BACKWARD * cost.backward_passes) * batch * rates.forward
    return decodes + teacher


def head_lab(ckpt, pairs: list, cost) -> str:
    """The Heads page's sentence: about how long the run takes, and how that was measured."""
    try:
        rates = lab_rates(*ckpt.cache_key, list(pairs[:LAB_SENTENCES]))
    except (ValueError, RuntimeError) as err:       # a full queue (QueueFull), a model that cannot decode
        return f"No time estimate: {md_escape(err)}"
    return (f"About {duration(lab_seconds(rates, cost))} on this machine, from timing a greedy decode of "
            f"{rates.sentences} held-out sentences on this model (the full model, and with every other head "
            f"removed) and a teacher-forced pass over them, times the decodes and passes above (other work on "
            f"the machine slows it)")


@st.cache_data(max_entries=8, show_spinner="Timing a few gold pairs to estimate how long it takes…")
def align_rates(ckpt_path: str, sha: str, gold_digest: str, _gold: list) -> AlignRates | None:
    """The scorecard's rates on this checkpoint and gold set (`_gold`: its first pairs; `gold_digest`
    names the set); None when the model can read none of them word for word."""
    from explorer.studies.align.attention import attention_matrices
    from explorer.studies.align.attribution import piece_attributions
    from explorer.studies.align.pairs import model_pairs

    ckpt = models.load(ckpt_path)
    model = ckpt.model
    with models.model_slot():
        usable, _ = model_pairs(model, ckpt.tokenizer, _gold)
        if not usable:
            return None
        attention = _timed(lambda: [list(attention_matrices(model, mp)) for mp in usable])
        gradient = _timed(lambda: piece_attributions(model, usable[0], "grad-x-input"))
        ig = _timed(lambda: piece_attributions(model, usable[0], "integrated-gradients", IG_PROBE))
    return AlignRates(len(usable), attention / len(usable), gradient, ig / IG_PROBE)


def scorecard_seconds(rates: AlignRates, settings) -> float:
    """The scorecard's seconds at these rates for AlignSettings, eflomal left out."""
    return (settings.pairs * rates.attention
            + settings.attribution_pairs * (rates.gradient + settings.ig_steps * rates.ig_point))


def scorecard(ckpt, gold: list, digest: str, settings) -> str | None:
    """The Alignment page's sentence: about how long the scorecard takes before eflomal; None when no
    gold pair could be timed."""
    try:
        rates = align_rates(*ckpt.cache_key, digest, list(gold[:ALIGN_PAIRS]))
    except (ValueError, RuntimeError) as err:
        return f"No time estimate: {md_escape(err)}"
    if rates is None:
        return None
    return (f"About {duration(scorecard_seconds(rates, settings))} on this machine before eflomal, from timing "
            f"the aligners on the first {rates.pairs} gold pairs (integrated gradients at {IG_PROBE} points on "
            f"one), times the pairs and points asked for (other work on the machine slows it)")


def duration(seconds: float) -> str:
    """Seconds in words, rounded as an estimate deserves: "under a second", "40 seconds", "12 minutes",
    "3 hours 10 minutes"."""
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return f"{round(seconds)} second" + ("" if round(seconds) == 1 else "s")
    minutes = math.ceil(seconds / 60) if seconds < 600 else round(seconds / 60)
    if minutes < 120:
        return f"{minutes} minutes"
    hours, rest = divmod(round(minutes / 10) * 10, 60)
    return f"{hours} hours" + (f" {rest} minutes" if rest else "")


@dataclass(frozen=True)
class GraphCost:
    targets: int                    # the rows to compute: every active feature and the logit
    passes: int                     # backward passes of up to `width` rows
    width: int
    seconds: float


@st.cache_data(max_entries=32, show_spinner="Timing one backward pass to estimate how long the graph takes…")
def graph_cost(ckpt_path: str, sha: str, dictionaries: str, text: str, target: str, position: int,
               foil: str | None, _transcoders: dict) -> GraphCost:
    """An attribution graph's cost on this machine (explorer.studies.graphs): its replacement model built
    and one batched replacement pass with one backward pass through it timed, times the backward passes
    its feature nodes need (`dictionaries`: the dictionaries' files as they are, so new ones are timed again)."""
    import torch

    from explorer.studies.common.gradients import rows_per_batch
    from explorer.studies.graphs.job import GraphSettings
    from explorer.studies.graphs.nodes import nodes_of
    from explorer.studies.graphs.replacement import Replacement
    from explorer.studies.graphs.step import question

    ckpt = models.load(ckpt_path)
    model = ckpt.model
    with models.model_slot():
        start = time.perf_counter()
        asked = question(model, ckpt.tokenizer, text, position, target, foil)
        rep = Replacement(model, _transcoders, asked.step)
        nodes = nodes_of(rep)
        build = time.perf_counter() - start
        targets = nodes.n_features + 1
        width = min(GraphSettings().batch, targets, rows_per_batch(model.cfg, nodes.src_len, nodes.prefix_len))
        sources = rep.actual(width, grad=True)
        with torch.enable_grad():
            start = time.perf_counter()
            reads = rep.run(sources)
            torch.autograd.grad(reads.hidden.sum(), sources.leaves(), allow_unused=True)
            probe = time.perf_counter() - start
    passes = math.ceil(targets / width)
    return GraphCost(targets, passes, width, 2 * build + probe + passes * probe * (BACKWARD - 1) / BACKWARD)


def graph(ckpt, dictionaries: str, text: str, target: str, position: int, foil: str | None,
          transcoders: dict) -> str:
    """The Graphs page's sentence: about how long the graph takes, and how that was measured."""
    try:
        cost = graph_cost(*ckpt.cache_key, dictionaries, text, target, position, foil, transcoders)
    except (ValueError, RuntimeError) as err:       # a full queue (QueueFull), a graph too large
        return f"No time estimate: {md_escape(err)}"
    said = duration(cost.seconds)
    said = f"About {said}" if said[0].isdigit() else said.capitalize()
    return (f"{said} on this machine: {cost.targets - 1:,} active features and the logit, "
            f"{cost.passes} backward pass{'es' if cost.passes != 1 else ''} of up to {cost.width} rows, from timing "
            "one here (other work on the machine slows it)")
