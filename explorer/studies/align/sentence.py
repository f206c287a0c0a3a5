"""One sentence pair under every aligner: the Alignment page's "this sentence" view.

Plain data for the UI: the words, each method's word-level score matrix, its predicted links, and
the gold links when the pair comes from a gold set. The attention methods are cheap (one forward);
the gradient methods cost a backward pass (integrated gradients: ig_steps of them) per target piece,
so the caller asks for them explicitly.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from explorer.studies.align.attention import attention_matrices
from explorer.studies.align.attribution import ATTRIBUTIONS, IG_STEPS, attribution_matrix
from explorer.studies.align.gold import GoldPair, Link
from explorer.studies.align.metrics import extract_links
from explorer.studies.align.pairs import model_pair


KIND_NAMES = {"attention": "cross-attention", "value-norm": "value-norm attention",
              "grad-x-input": "gradient × input", "integrated-gradients": "integrated gradients"}
VARIANT_NAMES = {"naive": "where predicted", "shift": "Shift-Att"}


@dataclass(frozen=True)
class Method:
    """One aligner for one sentence: `kind` is "attention", "value-norm" or an ATTRIBUTIONS name."""

    kind: str
    variant: str = "naive"            # naive | shift (attention kinds only)
    layer: int | None = None          # 0-based; None = mean over layers
    head: int | None = None           # 0-based; None = mean over the layer's heads

    def label(self) -> str:
        """The method's name as the page's selectors write it."""
        if self.kind in ATTRIBUTIONS:
            return KIND_NAMES[self.kind]
        where = ("all layers" if self.layer is None else
                 f"layer {self.layer + 1}" + ("" if self.head is None else f" head {self.head + 1}"))
        return f"{KIND_NAMES[self.kind]} ({VARIANT_NAMES[self.variant]}), {where}"


@dataclass
class SentenceAlignment:
    gold: GoldPair                                           # the pair and its gold links
    matrices: dict[str, np.ndarray] = field(default_factory=dict)   # method label -> [target words, source words]
    links: dict[str, set[Link]] = field(default_factory=dict)       # method label -> (source, target) links

    @property
    def src_words(self) -> list[str]:
        return self.gold.src

    @property
    def tgt_words(self) -> list[str]:
        return self.gold.tgt


def align_sentence(model, tokenizer, pair: GoldPair, methods: list[Method],
                   ig_steps: int = IG_STEPS) -> SentenceAlignment:
    """Every method's word matrix and links for one pair (Unusable when the model cannot read it)."""
    mp = model_pair(model, tokenizer, pair)
    out = SentenceAlignment(gold=pair)
    wanted = {(m.kind, m.variant, m.layer, m.head): m for m in methods if m.kind not in ATTRIBUTIONS}
    if wanted:
        for key, matrix in attention_matrices(model, mp):
            if key in wanted:
                out.matrices[wanted[key].label()] = matrix
    for m in methods:
        if m.kind in ATTRIBUTIONS:
            out.matrices[m.label()] = attribution_matrix(model, mp, m.kind, ig_steps)
    gradient = {m.label() for m in methods if m.kind in ATTRIBUTIONS}
    for label, matrix in out.matrices.items():
        scores = np.abs(matrix) if label in gradient else matrix      # attributions: the size counts, not the sign
        out.links[label] = extract_links(scores, "target")
    return out
