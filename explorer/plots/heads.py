"""The head lab's figures, from its JSON result (explorer.studies.heads.job): plain lists of dicts in,
plotly Figures out, no Streamlit. Layers and heads are 1-based, as in the JSON.

- head_grids: one layers x heads heatmap per attention kind of one per-head value (confidence,
  entropy, normalised importance);
- removal_histogram: how much BLEU the set loses (or, approximate, how much its teacher-forced loss
  rises) when each head alone is removed;
- pruning_figure: BLEU against the share of heads removed, least important first vs the mean of
  the random orders, one panel per scope (each kind, then all heads together).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.inspection.trace import KIND_LABELS, KINDS
from explorer.plots.style import SEQUENTIAL_SCALE

SCOPE_LABELS = {**KIND_LABELS, "all": "all heads"}


def head_grid(rows: Sequence[dict], kind: str, field: str) -> np.ndarray:
    """rows' `field` for one kind as a [layers, heads] array (NaN where missing or None)."""
    mine = [r for r in rows if r.get("kind") == kind]
    if not mine:
        return np.zeros((0, 0))
    grid = np.full((max(r["layer"] for r in mine), max(r["head"] for r in mine)), np.nan)
    for r in mine:
        value = r.get(field)
        grid[r["layer"] - 1, r["head"] - 1] = np.nan if value is None else float(value)
    return grid


def head_grids(rows: Sequence[dict], field: str, title: str, colorscale: str = SEQUENTIAL_SCALE) -> go.Figure:
    """One heatmap per kind present in rows (layers down, heads across), one shared colour scale."""
    kinds = [k for k in KINDS if any(r.get("kind") == k for r in rows)]
    grids = {k: head_grid(rows, k, field) for k in kinds}
    values = np.concatenate([g.ravel() for g in grids.values()]) if grids else np.zeros(0)
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    fig = make_subplots(rows=1, cols=max(1, len(kinds)), subplot_titles=[KIND_LABELS[k] for k in kinds],
                        horizontal_spacing=0.08)
    for i, kind in enumerate(kinds):
        g = grids[kind]
        fig.add_trace(go.Heatmap(
            z=g, x=list(range(1, g.shape[1] + 1)), y=list(range(1, g.shape[0] + 1)), zmin=lo, zmax=hi,
            colorscale=colorscale, showscale=i == len(kinds) - 1, colorbar=dict(title=field),
            hovertemplate=f"{KIND_LABELS[kind]}<br>layer %{{y}}, head %{{x}}<br>{field} %{{z:.3f}}<extra></extra>"),
            row=1, col=i + 1)
        fig.update_xaxes(title_text="head", dtick=1, row=1, col=i + 1)
        fig.update_yaxes(title_text="layer" if i == 0 else None, dtick=1, autorange="reversed", row=1, col=i + 1)
    fig.update_layout(title=title, height=300, margin=dict(t=70, b=40))
    return fig


REMOVAL_AXES = {                        # a single-head removal's score: title, x axis, hover label
    "bleu_drop": ("BLEU drop when one head is removed (each head alone)",
                  "BLEU of the full model − BLEU without the head", "BLEU drop"),
    "loss_rise": ("Loss rise when one head is removed (approximate)",
                  "teacher-forced loss without the head − the full model's (nats per token)", "loss rise"),
}


def removal_histogram(removals: Sequence[dict], field: str = "bleu_drop") -> go.Figure:
    """Histogram of what each head's removal alone costs (positive: removing it hurts): the BLEU drop,
    or with field="loss_rise" the teacher-forced loss rise (the head lab's approximate scoring)."""
    title, axis, label = REMOVAL_AXES[field]
    values = [r[field] for r in removals if r.get(field) is not None]
    fig = go.Figure(go.Histogram(x=values, nbinsx=max(5, min(40, len(values))), marker_color="#4c78a8",
                                 hovertemplate=f"{label} %{{x}}<br>%{{y}} heads<extra></extra>"))
    fig.add_vline(x=0, line_dash="dot", line_color="grey")
    fig.update_layout(title=title, height=320, xaxis_title=axis, yaxis_title="heads", bargap=0.05)
    return fig


def pruning_series(curves: Sequence[dict], scope: str) -> dict[str, tuple[list[float], list[float]]]:
    """{"importance": (fractions, BLEU), "random": (fractions, mean BLEU over the seeds)} for a scope."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    mine = [c for c in curves if c.get("scope") == scope]
    for c in mine:
        if c.get("order") == "importance":
            out["importance"] = (list(c["fraction"]), list(c["bleu"]))
    by_point: dict[float, list[float]] = defaultdict(list)
    for c in mine:
        if c.get("order") == "random":
            for f, b in zip(c["fraction"], c["bleu"]):
                by_point[round(float(f), 9)].append(float(b))
    if by_point:
        points = sorted(by_point)
        out["random"] = (points, [float(np.mean(by_point[p])) for p in points])
    return out


def pruning_figure(curves: Sequence[dict]) -> go.Figure:
    """BLEU vs share of heads removed, one panel per scope: importance order vs random mean."""
    scopes = [s for s in SCOPE_LABELS if any(c.get("scope") == s for c in curves)]
    fig = make_subplots(rows=1, cols=max(1, len(scopes)), subplot_titles=[SCOPE_LABELS[s] for s in scopes],
                        shared_yaxes=True)
    for i, scope in enumerate(scopes):
        series = pruning_series(curves, scope)
        for name, colour, dash in (("importance", "#d62728", "solid"), ("random", "#7f7f7f", "dash")):
            if name not in series:
                continue
            x, y = series[name]
            label = "least important first" if name == "importance" else "random order (mean of seeds)"
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=label, legendgroup=name,
                                     showlegend=i == 0, line=dict(color=colour, dash=dash),
                                     hovertemplate="%{x:.0%} removed<br>BLEU %{y:.2f}<extra></extra>"),
                          row=1, col=i + 1)
        fig.update_xaxes(title_text="share of heads removed", tickformat=".0%", range=[-0.02, 1.02],
                         row=1, col=i + 1)
    fig.update_yaxes(title_text="BLEU (greedy)", row=1, col=1)
    fig.update_layout(title="Pruning: heads removed in order of importance vs at random", height=340,
                      legend=dict(orientation="h", y=-0.3), margin=dict(t=70))
    return fig
