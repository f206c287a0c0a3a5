"""Figures of the Positional-encoding page: pure builders, numpy in, plotly Figure out.

No Streamlit here, so every figure can be unit-tested on its data (the heatmap's z must be
exactly the table the model adds) and reused by a notebook or the browser tests.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.plots.style import SEQUENTIAL_SCALE, SIGNED_SCALE, label, signed_range


def pe_heatmap(table: np.ndarray, title: str = "Positional encoding") -> go.Figure:
    """Positions down, dimensions across; z is `table` itself ([L, d]), values in [-1, 1] for sinusoids."""
    table = np.asarray(table)
    limit = signed_range(table)
    fig = go.Figure(go.Heatmap(
        z=table, x=np.arange(table.shape[1]), y=np.arange(table.shape[0]), colorscale=SIGNED_SCALE,
        zmin=-limit, zmax=limit, colorbar=dict(title="value"),
        hovertemplate="position %{y}<br>dimension %{x}<br>value %{z:.4f}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="dimension", yaxis_title="position", height=460,
                      margin=dict(l=50, r=20, t=50, b=40))
    fig.update_yaxes(autorange="reversed")
    return fig


def dimension_curves(table: np.ndarray, dims: Sequence[int], wavelengths: Sequence[float] | None = None,
                     title: str = "Chosen dimensions over positions") -> go.Figure:
    """One line per chosen dimension: PE(pos, dim) against pos (legend gives the wavelength)."""
    table = np.asarray(table)
    positions = np.arange(table.shape[0])
    fig = go.Figure()
    for dim in dims:
        kind = "sin" if dim % 2 == 0 else "cos"
        label = f"dim {dim} ({kind}"
        label += f", λ={wavelengths[dim]:.3g})" if wavelengths is not None else ")"
        fig.add_trace(go.Scatter(x=positions, y=table[:, dim], mode="lines", name=label,
                                 hovertemplate=f"dim {dim}<br>position %{{x}}<br>value %{{y:.4f}}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="position", yaxis_title="PE(position, dimension)", height=360,
                      margin=dict(l=50, r=20, t=50, b=40), legend=dict(orientation="h", y=-0.25))
    return fig


def similarity_heatmap(sim: np.ndarray, title: str = "PE(i) · PE(j)") -> go.Figure:
    """The [L, L] dot-product matrix: constant along diagonals for sinusoids (only i - j matters).

    Square cells (one position as wide as it is tall): the plot area shrinks to a square ("domain")
    instead of plotly widening the x range beyond the positions (a wide page once showed 100 positions
    on a -50..150 axis)."""
    sim = np.asarray(sim)
    fig = go.Figure(go.Heatmap(
        z=sim, x=np.arange(sim.shape[1]), y=np.arange(sim.shape[0]), colorscale=SEQUENTIAL_SCALE,
        colorbar=dict(title="dot"), hovertemplate="i %{y}<br>j %{x}<br>PE(i)·PE(j) %{z:.3f}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="position j", yaxis_title="position i", height=460,
                      margin=dict(l=50, r=20, t=50, b=40))
    fig.update_xaxes(range=[-0.5, sim.shape[1] - 0.5], constrain="domain")
    fig.update_yaxes(range=[sim.shape[0] - 0.5, -0.5], scaleanchor="x", constrain="domain")   # row 0 on top
    return fig


def offset_figure(profile: np.ndarray, title: str = "PE(p) · PE(p + k) against the offset k") -> go.Figure:
    """The similarity as a function of the offset alone (one row of the matrix, any row)."""
    fig = go.Figure(go.Scatter(x=np.arange(len(profile)), y=profile, mode="lines",
                               hovertemplate="offset %{x}<br>dot %{y:.3f}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="offset k", yaxis_title="dot product", height=300,
                      margin=dict(l=50, r=20, t=50, b=40))
    return fig


def wavelength_figure(wavelengths: np.ndarray, base: float, d_model: int) -> go.Figure:
    """Wavelength 2π·base^(2i/d) of each sin/cos pair i, on a log axis (a geometric progression), ticked
    at powers of ten only (plotly's in-between "2" and "5" labels are drawn at 3/4 of the tick size)."""
    pairs = np.arange(len(wavelengths))
    fig = go.Figure(go.Scatter(
        x=pairs, y=wavelengths, mode="lines+markers", marker=dict(size=4),
        customdata=np.stack([2 * pairs, 2 * pairs + 1], axis=1),
        hovertemplate="pair i=%{x} (dims %{customdata[0]}, %{customdata[1]})<br>"
                      "wavelength %{y:.4g} positions<extra></extra>"))
    fig.update_layout(title=f"Wavelength per pair (d_model={d_model}, base={base:g})",
                      xaxis_title="pair i (dimensions 2i and 2i+1)", yaxis_title="wavelength (positions)",
                      yaxis=dict(type="log", dtick=1), height=340, margin=dict(l=50, r=20, t=50, b=40))
    return fig


def norm_bars(tokens: Sequence[str], token_norms: np.ndarray, position_norms: np.ndarray,
              title: str = "Norm of the scaled token embedding vs its positional encoding") -> go.Figure:
    """Grouped bars per token position: ||sqrt(d)·E[x]|| next to ||PE(pos)||."""
    x = [f"{i}: {label(t)}" for i, t in enumerate(tokens, 1)]        # positions from 1; `</s>` is plotly HTML
    fig = go.Figure([
        go.Bar(x=x, y=token_norms, name="‖√d · E[token]‖",
               hovertemplate="%{x}<br>token embedding norm %{y:.2f}<extra></extra>"),
        go.Bar(x=x, y=position_norms, name="‖PE(position)‖",
               hovertemplate="%{x}<br>positional encoding norm %{y:.2f}<extra></extra>"),
    ])
    fig.update_layout(title=title, barmode="group", xaxis_title="position: token", yaxis_title="L2 norm",
                      height=360, margin=dict(l=50, r=20, t=50, b=80), legend=dict(orientation="h", y=1.1))
    return fig
