"""Figures of the Train, Schedule and Checkpoints pages: pure builders, data in, plotly Figure out.

A run's curves come in as explorer.store.metrics.Curves (explorer.store.run_files.read_curves reads
them from the run directory); nothing here reads a file.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.plots.style import label
from explorer.store.metrics import Curves

_MARGIN = dict(l=50, r=20, t=50, b=40)


# ---- a run's curves ------------------------------------------------------------------------------
def training_figure(c: Curves, planned: tuple[np.ndarray, np.ndarray] | None = None) -> go.Figure:
    """Six panels: loss, perplexity, LR (actual over planned), tokens/s, dev BLEU and chrF."""
    fig = make_subplots(rows=2, cols=3, subplot_titles=("Loss", "Perplexity (log scale)", "Learning rate",
                                                        "Tokens / second", "Dev BLEU", "Dev chrF"))
    line = dict(mode="lines+markers", marker=dict(size=4))
    fig.add_trace(go.Scatter(x=c.step, y=c.loss, name="train loss", **line), 1, 1)
    fig.add_trace(go.Scatter(x=c.eval_step, y=c.dev_loss, name="dev loss", **line), 1, 1)
    fig.add_trace(go.Scatter(x=c.step, y=c.ppl, name="train ppl", **line), 1, 2)
    fig.add_trace(go.Scatter(x=c.eval_step, y=c.dev_ppl, name="dev ppl", **line), 1, 2)
    if planned is not None:
        fig.add_trace(go.Scatter(x=planned[0], y=planned[1], name="planned LR", mode="lines",
                                 line=dict(dash="dash", color="gray")), 1, 3)
    fig.add_trace(go.Scatter(x=c.step, y=c.lr, name="actual LR", **line), 1, 3)
    fig.add_trace(go.Scatter(x=c.step, y=c.tokens_per_s, name="tokens/s", **line), 2, 1)
    fig.add_trace(go.Scatter(x=c.eval_step, y=c.bleu, name="BLEU", **line), 2, 2)
    fig.add_trace(go.Scatter(x=c.eval_step, y=c.chrf, name="chrF", **line), 2, 3)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_xaxes(title_text="step", row=2)
    fig.update_layout(height=560, margin=_MARGIN, legend=dict(orientation="h", y=-0.15))
    return fig


# ---- schedule and label smoothing ---------------------------------------------------------------
def schedule_figure(curves: Sequence[tuple[str, np.ndarray, np.ndarray]],
                    actual: tuple[np.ndarray, np.ndarray] | None = None,
                    title: str = "Noam learning-rate schedule") -> go.Figure:
    """One line per (label, steps, lr); `actual` (steps, lr) a run logged, drawn as markers.

    The first curve is the one the page is about (the reader's own settings, a run's plan); the others
    are references, dashed and thinner. The first is drawn last, on top, and listed first: with the
    default settings it equals one of the paper's curves, and drawn under it, it was hidden.
    """
    fig = go.Figure()
    for rank, (name, steps, lr) in reversed(list(enumerate(curves))):
        line = dict(width=4) if rank == 0 else dict(width=2, dash="dash")
        fig.add_trace(go.Scatter(x=steps, y=lr, mode="lines", name=name, line=line, legendrank=1000 + rank,
                                 hovertemplate="step %{x}<br>lr %{y:.3g}<extra>" + name + "</extra>"))
    if actual is not None:
        fig.add_trace(go.Scatter(x=actual[0], y=actual[1], mode="markers", name="logged by the run",
                                 marker=dict(size=5, color="black"), legendrank=1000 + len(curves)))
    fig.update_layout(title=title, xaxis_title="step", yaxis_title="learning rate", height=420, margin=_MARGIN,
                      legend=dict(orientation="h", y=-0.2))
    return fig


def smoothing_figure(dist: np.ndarray, target: int, labels: Sequence[str] | None = None,
                     title: str = "Smoothed target distribution") -> go.Figure:
    """Bars of the [V] target distribution the loss compares the model's prediction with."""
    dist = np.asarray(dist, dtype=np.float64)
    x = list(labels) if labels is not None else [str(i) for i in range(len(dist))]
    colors = ["crimson" if i == target else "steelblue" for i in range(len(dist))]
    fig = go.Figure(go.Bar(x=x, y=dist, marker_color=colors, hovertemplate="%{x}: %{y:.4f}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="token", yaxis_title="target probability", height=360,
                      margin=_MARGIN)
    return fig


def smoothed_loss(p_correct: np.ndarray, vocab_size: int, epsilon: float) -> np.ndarray:
    """Cross-entropy against the smoothed target when the model puts p on the right token and
    spreads 1 - p evenly over the other V - 1 (PyTorch's convention, as the trainer uses it).

    With epsilon > 0 the minimum is at p = 1 - eps + eps/V, not at p = 1: confidence is penalized.
    """
    p = np.clip(np.asarray(p_correct, dtype=np.float64), 1e-12, 1 - 1e-12)        # [N]
    on, off = 1 - epsilon + epsilon / vocab_size, epsilon / vocab_size
    return -(on * np.log(p) + off * (vocab_size - 1) * np.log((1 - p) / (vocab_size - 1)))


def smoothing_loss_figure(vocab_size: int, epsilon: float, n: int = 400) -> go.Figure:
    """Loss against the probability given to the correct token, for epsilon and for no smoothing."""
    p = np.linspace(0.01, 0.999, n)                                                  # [N]
    fig = go.Figure()
    for eps, name in ((0.0, "no smoothing"), (epsilon, f"ε = {epsilon:g}")):
        fig.add_trace(go.Scatter(x=p, y=smoothed_loss(p, vocab_size, eps), mode="lines", name=name))
    best = 1 - epsilon + epsilon / vocab_size
    fig.add_vline(x=best, line_dash="dot", annotation_text=f"minimum at p = {best:.3f}")
    fig.update_layout(title="Loss against the probability of the correct token", xaxis_title="p(correct)",
                      yaxis_title="loss", height=360, margin=_MARGIN, legend=dict(orientation="h", y=-0.25))
    return fig


# ---- checkpoint comparison -----------------------------------------------------------------------
def logprob_figure(pieces: Sequence[str], lp_a: Sequence[float], lp_b: Sequence[float],
                   names: tuple[str, str] = ("A", "B"), title: str = "Per-token log-probability") -> go.Figure:
    """Grouped bars: each output token's log-prob under model A and model B."""
    x = [f"{i + 1}. {label(p)}" for i, p in enumerate(pieces)]                # "</s>" is not a tag
    fig = go.Figure([go.Bar(x=x, y=list(lp_a), name=names[0]), go.Bar(x=x, y=list(lp_b), name=names[1])])
    fig.update_layout(title=title, barmode="group", yaxis_title="log p(token)", height=340, margin=_MARGIN,
                      legend=dict(orientation="h", y=-0.3))
    return fig


def param_change_figure(groups: Sequence[str], values: Sequence[float],
                        title: str = "Relative parameter change ‖B − A‖ / ‖A‖ per layer") -> go.Figure:
    fig = go.Figure(go.Bar(x=list(groups), y=list(values), hovertemplate="%{x}: %{y:.4f}<extra></extra>"))
    fig.update_layout(title=title, yaxis_title="relative change", height=340, margin=_MARGIN)
    return fig
