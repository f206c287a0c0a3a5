"""Role labels for heads, by documented rules with their thresholds in one table.

Voita et al. 2019 ("Analyzing Multi-Head Self-Attention: Specialized Heads Do the Heavy Lifting,
the Rest Can Be Pruned", ACL) name three functions of encoder heads: positional (attends to the
previous or next token), syntactic (attends along a dependency relation) and rare-word (attends to
the least frequent token of the sentence). Their tests count how often the head's maximum falls on
the role's token; here a role is read off the mean share of weight over the sentence set (the
figures of explorer.studies.heads.stats), which every kind has, so the same rules label decoder and
cross-attention heads too. Syntactic heads need a dependency parser and are not labelled.
Added: self (own position), end-of-sentence sink (Clark et al. 2019's [SEP]-like no-op), alignment
(cross-attention along the diagonal) and broad (spread-out, low-confidence heads).

A head gets every role whose rule holds, strongest figure first; the rule's text and the figure
that triggered it are kept with the label, so a table can say why.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.studies.heads.stats import KindStats


@dataclass(frozen=True)
class Rule:
    role: str
    kinds: tuple[str, ...]             # which attention kinds the rule applies to
    stat: str                          # the figure of explorer.studies.heads.stats it reads (mean over sentences)
    above: float | None = None         # holds when mean > above ...
    below: float | None = None         # ... and/or mean < below
    also: tuple[str, float, float] | None = None   # a second figure and its (above, below) bounds

    def text(self) -> str:
        parts = ([f"{self.stat} > {self.above:g}"] if self.above is not None else []) + \
                ([f"{self.stat} < {self.below:g}"] if self.below is not None else [])
        if self.also:
            name, lo, hi = self.also
            parts += ([f"{name} > {lo:g}"] if lo is not None else []) + ([f"{name} < {hi:g}"] if hi is not None else [])
        return " and ".join(parts)


ALL, SELF_ATTN = ("encoder", "decoder", "cross"), ("encoder", "decoder")
RULES = (
    Rule("positional-previous", SELF_ATTN, "to_prev", above=0.5),
    Rule("positional-next", ("encoder",), "to_next", above=0.5),       # the decoder cannot see the next token
    Rule("self", SELF_ATTN, "to_self", above=0.5),
    Rule("end-of-sentence sink", ALL, "to_eos", above=0.5),
    Rule("rare-word", ALL, "to_rare", above=0.5),
    Rule("alignment", ("cross",), "diagonality", above=0.5),
    Rule("broad", ALL, "spread", above=0.7, also=("confidence", None, 0.3)),
)
UNLABELLED = "unlabelled"


@dataclass(frozen=True)
class RoleLabel:
    kind: str
    layer: int                       # 0-based
    head: int                        # 0-based
    role: str                        # the first (strongest) matching role, or "unlabelled"
    rule: str                        # that rule's text ("" when unlabelled)
    value: float                     # the figure that triggered it (NaN when unlabelled)
    others: list[tuple[str, str, float]]   # every further matching (role, rule, value)


def _holds(value: float, above: float | None, below: float | None) -> bool:
    if not np.isfinite(value):
        return False
    return (above is None or value > above) and (below is None or value < below)


def matches(kind: str, figures: dict[str, float], rules=RULES) -> list[tuple[str, str, float]]:
    """Every (role, rule text, figure) that holds for one head's mean figures, strongest first
    (the margin past the threshold, relative to it)."""
    found = []
    for rule in rules:
        if kind not in rule.kinds or not _holds(figures[rule.stat], rule.above, rule.below):
            continue
        if rule.also and not _holds(figures[rule.also[0]], rule.also[1], rule.also[2]):
            continue
        bound = rule.above if rule.above is not None else rule.below
        margin = abs(figures[rule.stat] - bound) / max(abs(bound), 1e-9)
        found.append((margin, rule.role, rule.text(), float(figures[rule.stat])))
    return [(role, text, value) for _, role, text, value in sorted(found, key=lambda f: -f[0])]


def label_heads(stats: dict[str, KindStats], rules=RULES) -> list[RoleLabel]:
    """One RoleLabel per head of every kind (kind, layer, head order)."""
    labels = []
    for kind, ks in stats.items():
        n_layers, n_heads = ks.shape
        for layer in range(n_layers):
            for head in range(n_heads):
                found = matches(kind, {name: float(m[layer, head]) for name, m in ks.mean.items()}, rules)
                role, text, value = found[0] if found else (UNLABELLED, "", float("nan"))
                labels.append(RoleLabel(kind, layer, head, role, text, value, found[1:]))
    return labels
