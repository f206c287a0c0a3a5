"""Everything on screen can be taken away: figures (PNG/SVG), matrices (CSV), the analysis (JSON).

* Figures: plotly's own toolbar camera button, configured here (file name, format, scale), so a
  download costs nothing until clicked. The format (PNG or SVG) is a sidebar choice shared by all
  pages, kept in st.session_state["figure_format"].
* Matrices and tables: CSV; matrix labels are "position:token" (so repeated tokens stay apart and
  no label starts like a formula); table text that a spreadsheet would run as a formula is
  prefixed with a quote.
* The JSON bundle: checkpoint name and hash, input, settings, output and attention arrays; built
  only when the button is clicked (a callable passed to st.download_button).
* Presenter mode (webapp.presenter) hides the CSV and JSON buttons, which a lecture does not use;
  the figures' camera button stays.
* One convention on every page: every figure goes through `chart` (so the sidebar's format holds), every
  file name starts with the checkpoint's name (`file_stem(ckpt.name, ...)`), and a figure drawn from
  data has its numbers beside it as CSV or JSON (tests/support/exports.py checks the pages).
"""
from __future__ import annotations

import io
import json
import math
import re
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from explorer.inspection.trace import KINDS
from webapp import presenter

FORMATS = ("png", "svg")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def file_stem(*parts: Any) -> str:
    """A safe file name from parts: `file_stem("cross", "L2", "H3")` -> "cross_L2_H3"."""
    stem = "_".join(str(p) for p in parts if p not in (None, ""))
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-_.")[:120] or "figure"


def plotly_config(name: str, fmt: str | None = None) -> dict:
    """st.plotly_chart config: the toolbar's camera button saves `name`.png or .svg."""
    fmt = fmt or st.session_state.get("figure_format", "png")
    fmt = fmt if fmt in FORMATS else "png"
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": fmt, "filename": file_stem(name), "scale": 2 if fmt == "png" else 1}}


def chart(fig: go.Figure, name: str, key: str | None = None, on_click: Callable[[], None] | None = None) -> None:
    """Show a figure with the download button configured, its text sized for the mode (presenter.figure):
    every figure goes through here. `on_click`: called before the rerun a click on a point (a heatmap
    cell) starts; the clicked point is in st.session_state[key] (clicked_point reads it)."""
    clicks = dict(on_select=on_click, selection_mode="points") if on_click is not None else {}
    st.plotly_chart(presenter.figure(fig), config=plotly_config(name), key=key, width="stretch", **clicks)


def clicked_point(key: str) -> dict | None:
    """The point a click on chart `key` selected (plotly's curve_number, point_index, x, y), or None."""
    event = st.session_state.get(key)
    points = (event or {}).get("selection", {}).get("points", []) if hasattr(event, "get") else []
    return points[0] if points else None


def _cell(label: Any) -> str:
    text = str(label)
    return "'" + text if text.startswith(_FORMULA_START) else text


def matrix_csv(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str]) -> str:
    """A matrix as CSV text; labels are numbered from 1, like every position the app shows ("3:▁word" is
    the third token), so repeated tokens stay distinct."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"matrix {m.shape} does not match {len(row_labels)} x {len(col_labels)} labels")
    frame = pd.DataFrame(m, index=[_cell(f"{i}:{t}") for i, t in enumerate(row_labels, 1)],
                         columns=[_cell(f"{j}:{t}") for j, t in enumerate(col_labels, 1)])
    buffer = io.StringIO()
    frame.to_csv(buffer, float_format="%.6g")
    return buffer.getvalue()


def csv_button(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], name: str,
               key: str, label: str = "Download matrix (CSV)") -> None:
    if not presenter.advanced():
        return
    st.download_button(label, data=matrix_csv(matrix, row_labels, col_labels), file_name=file_stem(name) + ".csv",
                       mime="text/csv", key=key, on_click="ignore")


def table_csv(frame: pd.DataFrame) -> str:
    """A table as CSV; text cells that a spreadsheet would run as a formula get a leading quote."""
    return frame.map(lambda v: _cell(v) if isinstance(v, str) else v).to_csv(index=False)


def table_csv_button(frame: pd.DataFrame, name: str, key: str, label: str = "Download table (CSV)") -> None:
    if not presenter.advanced():
        return
    st.download_button(label, data=table_csv(frame), file_name=file_stem(name) + ".csv",
                       mime="text/csv", key=key, on_click="ignore")


# ---- the JSON bundle -----------------------------------------------------------------------------

def jsonable(value: Any, decimals: int = 5) -> Any:
    """Plain JSON values: numpy arrays -> nested lists (rounded), NaN/inf -> None, tuples -> lists."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            rounded = np.round(value.astype(np.float64), decimals)
            return jsonable(np.where(np.isfinite(rounded), rounded, np.nan).tolist(), decimals)
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): jsonable(v, decimals) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, decimals) for v in value]
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(float(value)) else round(float(value), decimals + 3)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value


def analysis_bundle(ckpt, translation, cfg: dict, view: dict, trace=None, extra: dict | None = None) -> dict:
    """The whole current analysis as plain data (see the module docstring)."""
    meta = getattr(ckpt, "meta", {}) or {}
    bundle: dict[str, Any] = {
        "format": "transformer-explorer/analysis-v1",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "checkpoint": {"name": ckpt.name, "sha256": ckpt.sha256, "src_lang": meta.get("src_lang"),
                       "tgt_lang": meta.get("tgt_lang"), "step": (meta.get("training") or {}).get("step")},
        "input": {"text": translation.source, "truncated": translation.truncated, "note": translation.reason},
        "settings": {"decode": cfg, "view": view},
        "output": {
            "translation": translation.text, "src_ids": translation.src_ids, "src_pieces": translation.src_pieces,
            "hypotheses": [{"text": h.text, "pieces": h.pieces, "ids": h.ids, "score": h.score,
                            "normalized": h.normalized, "token_logprobs": h.token_logprobs,
                            "finished": h.finished} for h in translation.hypotheses]},
    }
    if trace is not None:
        attention: dict[str, Any] = {"src_tokens": trace.src_tokens, "decoder_input_tokens": trace.tgt_tokens,
                                     "output_tokens": trace.meta.get("out_tokens", []),
                                     "layout": "[layer][head][query][key], 0-based, weights after softmax"}
        for kind in KINDS:
            attention[kind] = trace.stack(kind)                                   # [L, H, q, k]
        bundle["attention"] = attention
    if extra:
        bundle.update(extra)
    return jsonable(bundle)


def bundle_bytes(make: Callable[[], dict]) -> Callable[[], bytes]:
    return lambda: json.dumps(make(), ensure_ascii=False, allow_nan=False).encode("utf-8")


def bundle_button(make: Callable[[], dict], name: str, key: str,
                  label: str = "Download the whole analysis (JSON)") -> None:
    """A download button whose JSON is built only when it is clicked."""
    if not presenter.advanced():
        return
    st.download_button(label, data=bundle_bytes(make), file_name=file_stem(name) + ".json",
                       mime="application/json", key=key, on_click="ignore")
