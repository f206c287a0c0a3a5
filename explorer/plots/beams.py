"""Figures and tables of the Beam-search page, built from a BeamTrace (plain numpy): no Streamlit.

The trace answers the navigation questions itself (BeamTrace.parent_rows, path, best_path,
step_rows, alternatives_for); this module only lays the answers out. Tree layout: x is the step;
at each step rows are stacked in the order of their parents, then by rank, so branches fan out
without crossing.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer.decoding.beam_trace import STATUSES, BeamTrace
from explorer.plots.style import WEIGHTS_SCALE, label

STATUS_COLOURS = {"forced": "#8e44ad", "kept": "#1f77b4", "pruned": "#b0b0b0", "finished": "#2ca02c",
                  "truncated": "#ff7f0e"}
BEST_COLOUR = "#d62728"
# The tree's height: TREE_ROW_PX per candidate of its busiest step (plus title, legend and axis), so that
# a row holds a node and its label at any text size (presenter mode scales both, style.scale_text).
TREE_ROW_PX, TREE_MIN_HEIGHT, TREE_MAX_HEIGHT = 40, 400, 900
TREE_LABELLED_STEPS = 25       # longer searches: labels on the best path only (tree_figure)
# Why a search stopped, in words a student follows (the codes are explorer.decoding.beam.STOP_REASONS;
# the decoding logic keeps the codes, the words live here, once).
STOP_WORDS = {
    "canonical": "no unfinished hypothesis could still beat the worst of the finished ones kept, "
                 "even if it ended at once, so searching on could not change the result",
    "early_stopping": "as many hypotheses had finished as the beam is wide (early stopping), "
                      "so the search stopped without checking whether a longer one could still win",
    "max_len": "the length limit was reached before the search was settled; unfinished hypotheses "
               "were ranked as they stood",
    "running": "the search had not stopped when the trace ended",
}


def stop_reason_text(code: str) -> str:
    """The plain-words explanation of a BeamTrace's stop_reason code (an unknown code is shown as is)."""
    return STOP_WORDS.get(code, f"{code} (no explanation recorded for this reason)")


def tree_layout(trace: BeamTrace) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of every row: x = step + 1 (BOS sits at 0); y = place at that step, by (parent's y, rank)."""
    cand, parents = trace.candidates, trace.parent_rows()
    x = cand["step"].astype(np.float64) + 1
    y = np.zeros(len(cand), dtype=np.float64)
    for step in range(trace.n_steps):
        rows = trace.step_rows(step)
        parent_y = np.where(parents[rows] >= 0, y[np.maximum(parents[rows], 0)], 0.0)
        order = rows[np.lexsort((cand["rank"][rows], parent_y))]
        y[order] = np.arange(len(order)) - (len(order) - 1) / 2
    return x, y


def tree_figure(trace: BeamTrace, id_to_piece: Callable[[int], str], step: int | None = None,
                highlight: Sequence[int] = (), title: str = "All hypotheses of the beam search") -> go.Figure:
    """One node per candidate row (one trace per status), edges parent -> child, best path in red.

    `highlight` rows (e.g. the hypothesis chosen on the page) get a black ring; `step` (0-based) a
    guide line. x is the 1-based output position, as on the page's step slider.

    Labels: a node's token is written on the best path and on the kept and finished candidates; a
    pruned one's only on hover. A label is wider than a step, so labels sit above the nodes of odd
    steps and below those of even ones, and each row has TREE_ROW_PX; past TREE_LABELLED_STEPS steps
    even that crowds (at a projector's type size on a 1024 px screen), so only the best path keeps
    its labels and the subtitle says so.
    """
    cand, parents = trace.candidates, trace.parent_rows()
    x, y = tree_layout(trace)
    pieces = [id_to_piece(int(t)) for t in cand["token"]]
    best = trace.best_path()
    crowded = trace.n_steps > TREE_LABELLED_STEPS
    fig = go.Figure()
    fig.add_trace(_edges(x, y, parents, np.arange(len(cand)), "edges", "#c8c8c8", 1))
    if best:
        fig.add_trace(_edges(x, y, parents, np.asarray(best), "best path", BEST_COLOUR, 3.5))
    fig.add_trace(go.Scatter(x=[0], y=[0], mode="markers+text", text=["&lt;s&gt;"], textposition=_text_side(0),
                             marker=dict(size=10, color="black"), name="BOS", hovertemplate="BOS<extra></extra>",
                             showlegend=False))
    for code, status in enumerate(STATUSES):
        rows = np.flatnonzero(cand["status"] == code)
        if not len(rows):
            continue
        # row, step (1-based, as on the page), rank, token log-prob, cumulative, normalised
        custom = np.stack([rows, cand["step"][rows] + 1, cand["rank"][rows], cand["token_logprob"][rows],
                           cand["score"][rows], cand["normalized"][rows]], axis=1)
        on_best = np.isin(rows, best)
        fig.add_trace(go.Scatter(
            x=x[rows], y=y[rows], mode="markers+text", name=status, legendgroup="nodes",
            text=[label(pieces[r]) if on_best[i] or (status != "pruned" and not crowded) else ""
                  for i, r in enumerate(rows)],
            textposition=[_text_side(v) for v in x[rows]], textfont=dict(size=9),
            marker=dict(size=np.where(on_best, 13, 8), color=STATUS_COLOURS[status],
                        line=dict(width=np.where(np.isin(rows, list(highlight)), 3, 0), color="black")),
            customdata=custom, hovertext=[label(pieces[r]) for r in rows],
            hovertemplate=("<b>%{hovertext}</b> (" + status + ")<br>step %{customdata[1]:.0f}, "
                           "rank %{customdata[2]:.0f}<br>log p(token) %{customdata[3]:.3f}<br>"
                           "score %{customdata[4]:.3f}<br>normalised %{customdata[5]:.3f}<extra></extra>")))
    if step is not None:
        fig.add_vline(x=step + 1, line=dict(color="#555", dash="dot", width=1))
    busiest = max(len(trace.step_rows(s)) for s in range(trace.n_steps)) if trace.n_steps else 1
    if crowded:
        title = dict(text=title, subtitle=dict(text=f"{trace.n_steps} steps: labels on the best path only; "
                                                    "hover a node for its token", font=dict(size=12)))
    fig.update_layout(title=title, height=min(max(TREE_MIN_HEIGHT, 120 + TREE_ROW_PX * busiest), TREE_MAX_HEIGHT),
                      xaxis=dict(title="step (output position; BOS = 0)", dtick=max(1, round(trace.n_steps / 15)),
                                 range=[-0.8, trace.n_steps + 0.8]),
                      yaxis=dict(showticklabels=False, zeroline=False, title="", autorange="reversed"),
                      margin=dict(l=30, r=20, t=80, b=40),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=1, xanchor="right",
                                  traceorder="normal"))
    return fig


def _text_side(x: float) -> str:
    """Labels above the nodes of odd steps, below those of even ones (BOS, 0, too): a label is wider
    than a step, so neighbours at the same height would run into one another ("▁said▁to▁him")."""
    return "top center" if int(x) % 2 else "bottom center"


def _edges(x, y, parents, rows, name, colour, width) -> go.Scatter:
    xs, ys = [], []
    for r in rows:
        px, py = (x[parents[r]], y[parents[r]]) if parents[r] >= 0 else (0.0, 0.0)
        xs += [px, x[r], None]
        ys += [py, y[r], None]
    return go.Scatter(x=xs, y=ys, mode="lines", name=name, line=dict(color=colour, width=width),
                      hoverinfo="skip", showlegend=name == "best path")


def step_table(trace: BeamTrace, step: int, id_to_piece: Callable[[int], str]) -> pd.DataFrame:
    """The candidates ranked at one step: what each extends, the token, its log-prob, scores, fate."""
    cand, rows = trace.candidates, trace.step_rows(step)
    return pd.DataFrame({
        "rank": cand["rank"][rows].astype(int),
        "extends": [" ".join(id_to_piece(t) for t in trace.tokens(r)[:-1]) or "<s>" for r in rows],
        "token": [id_to_piece(int(t)) for t in cand["token"][rows]],
        "log-prob": cand["token_logprob"][rows].astype(float),
        "cumulative": cand["score"][rows].astype(float),
        "normalised": cand["normalized"][rows].astype(float),
        "status": [STATUSES[int(s)] for s in cand["status"][rows]],
        "row": rows.astype(int),
    })


def step_attention_figure(weights: np.ndarray, src_tokens: Sequence[str], title: str) -> go.Figure:
    """Cross-attention of one output position: rows = heads (+ their mean), columns = source tokens.

    weights [H, S] -> a heatmap of H + 1 rows.
    """
    weights = np.asarray(weights)
    z = np.vstack([weights, weights.mean(axis=0, keepdims=True)])           # [H+1, S]
    rows = [f"head {h + 1}" for h in range(weights.shape[0])] + ["mean"]
    cols = [f"{i}: {label(t)}" for i, t in enumerate(src_tokens, 1)]                  # positions from 1
    fig = go.Figure(go.Heatmap(z=z, x=cols, y=rows, colorscale=WEIGHTS_SCALE, zmin=0, zmax=1,
                               hovertemplate="%{y}<br>source %{x}<br>weight %{z:.3f}<extra></extra>"))
    fig.update_layout(title=title, height=120 + 26 * len(rows), margin=dict(l=60, r=20, t=50, b=60))
    fig.update_yaxes(autorange="reversed")
    return fig


def prefix_attention_figure(weights: np.ndarray, src_tokens: Sequence[str], out_tokens: Sequence[str],
                            title: str) -> go.Figure:
    """Cross-attention over the whole hypothesis prefix (mean over heads): [T, S]; last row = this step."""
    weights = np.asarray(weights)
    cols = [f"{i}: {label(t)}" for i, t in enumerate(src_tokens, 1)]                  # positions from 1
    rows = [f"{i}: {label(t)}" for i, t in enumerate(out_tokens, 1)]
    fig = go.Figure(go.Heatmap(z=weights, x=cols, y=rows, colorscale=WEIGHTS_SCALE, zmin=0, zmax=1,
                               hovertemplate="output %{y}<br>source %{x}<br>weight %{z:.3f}<extra></extra>"))
    fig.add_hrect(y0=len(rows) - 1.5, y1=len(rows) - 0.5, line=dict(color=BEST_COLOUR, width=2))
    fig.update_layout(title=title, height=140 + 24 * len(rows), margin=dict(l=80, r=20, t=50, b=60))
    fig.update_yaxes(autorange="reversed")
    return fig


def compare_figure(runs: dict[str, tuple[Sequence[str], Sequence[float]]],
                   title: str = "Per-token log-probability") -> go.Figure:
    """One line per run (name -> (pieces, token log-probs)): where the forced output gains or loses."""
    fig = go.Figure()
    for name, (pieces, lps) in runs.items():
        fig.add_trace(go.Scatter(x=np.arange(len(lps)), y=list(lps), mode="lines+markers+text", name=name,
                                 text=[label(p) for p in pieces], textposition="top center",
                                 hovertemplate="%{text}<br>position %{x}<br>log p %{y:.3f}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="output position", yaxis_title="log p(token)", height=340,
                      margin=dict(l=50, r=20, t=50, b=40), legend=dict(orientation="h", y=1.1))
    return fig
