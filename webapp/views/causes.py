"""The Causes page's parts: activation patching on a minimal pair (explorer.studies.patching).

- corrupted_text: the pair's second source, a one-word swap suggested from the model's vocabulary
  (explorer.studies.patching.swap, translated to check it changes the output) or the user's own text;
- show_pair: both sources piece by piece and both greedy translations, where they part (the token
  measured), or the library's reason the two texts make no pair, as a message;
- grids_section: every grid, computed on a button press (a few seconds on the shipped models, about half a
  minute at base size), cached for every session (webapp.analyses) and shown without a press whenever the
  cache holds them (this session's later runs, or a link opened while the server still keeps that pair's
  grids); then the picked cell (grid, row, column) and its patched run's own translation.
Every control is in the URL (webapp.url_keys: pair, swap, corrupt, dir, grid, row, col). Before the grids
are shown the cell's keys are not (the page draws no cell to pick): a link's cell is checked against the
pair and kept in the session until the grids come (hold_cell).
A link never starts the patching itself: the grids cost 2 x (every cell) runs of the model, and a page
opened from any link would spend them; the press says someone asked.
"""
from __future__ import annotations

import numpy as np
import streamlit as st

from explorer.studies.patching.grids import GRIDS, grid_cells
from explorer.studies.patching.job import row_labels
from explorer.studies.patching.swap import WEAK_GAP
from explorer.plots import patching as plots
from webapp import analyses, downloads, presenter, state
from webapp import url_keys as url
from webapp.numbering import position_label
from webapp.sentence import URL_CHARS

PAIR_KINDS = {"swap": "a suggested one-word swap", "own": "my own corrupted sentence"}
DIRECTIONS = {"denoise": "Denoising: the corrupted run, one clean activation patched in (what restores the word?)",
              "noise": "Noising: the clean run, one corrupted activation patched in (what destroys it?)"}
GRID_NAMES = {"encoder_resid": "Encoder residual stream (depth x source position)",
              "decoder_resid": "Decoder residual stream (layer x target position)",
              "encoder_heads": "Encoder self-attention heads", "decoder_heads": "Decoder self-attention heads",
              "cross_heads": "Cross-attention heads", "changed": "The changed word, per encoder depth"}
HEAD_GRIDS = {"encoder_heads": "encoder", "decoder_heads": "decoder", "cross_heads": "cross"}
HEAD_TITLES = {"encoder_heads": "encoder self", "decoder_heads": "decoder self", "cross_heads": "cross"}  # short: 3 panels
DONE = "_causes_computed"       # the pairs this session has patched: shown again without a press


def corrupted_text(ckpt, clean: str) -> str | None:
    """The corrupted source the user chose; None (after saying why) when there is none yet."""
    kind = url.seed(url.PATCH_PAIR, "causes_pair", "swap", options=tuple(PAIR_KINDS))
    kind = st.radio("Corrupted source", tuple(PAIR_KINDS), key="causes_pair", format_func=PAIR_KINDS.get,
                    horizontal=True)
    url.write(url.PATCH_PAIR, "causes_pair", kind)
    if kind == "own":
        url.put(swap=None)
        seeded = url.seed(url.PATCH_CORRUPT, "causes_corrupt", clean)
        if len(seeded) > URL_CHARS:
            url.hold("causes_corrupt", seeded[:URL_CHARS])
        own = st.text_input("Your corrupted sentence: the same sentence with one word changed", key="causes_corrupt",
                            max_chars=URL_CHARS)
        url.write(url.PATCH_CORRUPT, "causes_corrupt", own)
        return own
    url.put(corrupt=None)
    swaps = state.friendly(analyses.swap_suggestions, ckpt, clean, what="Suggesting a swap") or []
    if not swaps:
        url.put(swap=None)
        st.info("No one-word swap of this sentence changes its translation (a swap must keep the piece count: a "
                "whole-word piece for another). Choose **my own corrupted sentence** above and change one word.")
        return None
    url.seed(url.PATCH_SWAP, "causes_swap", 1, low=1, high=len(swaps))                  # 1-based, clamped
    pick = st.selectbox("Swap (nearest words by the model's own source embeddings)", range(1, len(swaps) + 1),
                        key="causes_swap", format_func=lambda i: _swap_label(swaps[i - 1]))
    url.write(url.PATCH_SWAP, "causes_swap", pick)
    return swaps[pick - 1].corrupt


def _swap_label(swap) -> str:
    """"old → new (cosine, the runs' logit gap)": the suggestions whose runs part clearly come first."""
    gap = "" if swap.gap is None else f", logit gap {swap.gap:.2f}" + (" (weak)" if swap.gap < WEAK_GAP else "")
    return f"{swap.old} → {swap.new} (cosine {swap.similarity:.2f}{gap})"


def _pieces(pieces: list[str], changed: set[int]) -> str:
    return " ".join(f"**{state.md_escape(p)}**" if i in changed else state.md_escape(p) for i, p in enumerate(pieces))


def show_pair(ckpt, clean: str, corrupt: str):
    """The pair (MinimalPair, its pieces) after showing it; None after the library's refusal, as a message."""
    found = state.friendly(analyses.minimal_pair, ckpt, clean, corrupt, what="Making the pair")
    if found is None:
        return None
    if isinstance(found, str):
        st.warning(f"These two sentences make no minimal pair: {state.md_escape(found)}. Change one word of the "
                   "second sentence, keeping its number of pieces, so that the translation changes.")       # a user's slip, not a crash
        return None
    pair, info = found
    changed = set(pair.changed)
    at = pair.position
    st.markdown(f"**Clean source:** {_pieces(info['src_pieces'], changed)}  \n"
                f"**Corrupted source:** {_pieces(info['corrupt_pieces'], changed)}  \n"
                f"**Clean translation:** {_pieces(info['clean_output'], {at})}  \n"
                f"**Corrupted translation:** {_pieces(info['corrupt_output'], {at})}")
    st.caption(f"Measured at output position {at + 1}, where the translations part: the clean run writes "
               f"{state.md_escape(info['clean_token'])}, the corrupted one {state.md_escape(info['corrupt_token'])} "
               "(greedy decoding; the shared output before it is forced in every run).")
    return pair, info


def direction() -> str:
    chosen = url.seed(url.PATCH_DIR, "causes_dir", "denoise", options=tuple(DIRECTIONS))
    chosen = st.radio("Direction", tuple(DIRECTIONS), key="causes_dir", format_func=DIRECTIONS.get)
    url.write(url.PATCH_DIR, "causes_dir", chosen)
    return chosen


def cost(model, pair) -> int:
    """How many patched runs the grids take: every cell of every grid, in both directions."""
    return 2 * sum(len(row) for grid in GRIDS for row in grid_cells(model, pair, grid))


def computed_grids(ckpt, clean: str, corrupt: str, pair, info: dict):
    """The grids when computed now (the button), earlier in this session, or by any session while the
    shared cache still holds them; None otherwise (the link's cell then waits: hold_cell)."""
    key = f"{ckpt.sha256}\n{clean}\n{corrupt}"
    done = st.session_state.setdefault(DONE, [])
    offer = st.empty()
    if key not in done and not analyses.patching_grids.holds(ckpt, clean, corrupt):
        hold_cell(ckpt, info, pair)
        with offer.container():
            st.info(f"Patching takes {cost(ckpt.model, pair):,} runs of the model (every cell below, in both "
                    "directions): a few seconds on the shipped models, about half a minute at base size.")
            if not st.button("Patch every activation", key="causes_start", type="primary"):
                return None
    with st.spinner("Patching every activation, one at a time…"):
        grids = state.friendly(analyses.patching_grids, ckpt, clean, corrupt, what="Patching")
    if grids is not None:
        offer.empty()                                             # the offer goes once the grids are there
    if grids is not None and key not in done:
        done.append(key)
        del done[:-8]                                              # the session's last few pairs
    return grids


def labels(ckpt, info: dict, pair, grid: str) -> tuple[list[str], list[str]]:
    """Row and column labels of a grid as the page shows them (1-based)."""
    model = ckpt.model
    rows = row_labels(model, grid)
    if grid == "encoder_resid":
        cols = [position_label(i, p if i not in pair.changed else f"{p}/{info['corrupt_pieces'][i]}")
                for i, p in enumerate(info["src_pieces"])]
    elif grid == "decoder_resid":
        writes = info["prefix_pieces"] + [f"{info['clean_token']}/{info['corrupt_token']}"]
        cols = [position_label(t, w) for t, w in enumerate(writes)]
    elif grid == "changed":
        cols = ["the changed position(s)"]
    else:
        cols = [f"head {h + 1}" for h in range(model.cfg.n_heads)]
    return rows, cols


def _seed_cell(ckpt, info: dict, pair, grid: str) -> tuple[list[str], list[str]]:
    """Seed the row and column boxes of `grid` (1-based, clamped to its size); its labels."""
    rows, cols = labels(ckpt, info, pair, grid)
    url.seed(url.PATCH_ROW, "causes_row", len(rows), low=1, high=len(rows))
    url.seed(url.PATCH_COL, "causes_col", pair.changed[0] + 1 if grid == "encoder_resid" else 1, low=1, high=len(cols))
    return rows, cols


def hold_cell(ckpt, info: dict, pair) -> None:
    """Before the grids are shown: the link's (or this session's) cell, checked and clamped against this
    pair, is kept in the session for pick_cell, and its keys leave the URL (no cell is drawn yet)."""
    grid = url.seed(url.PATCH_GRID, "causes_grid", "encoder_resid", options=list(GRID_NAMES))
    _seed_cell(ckpt, info, pair, grid)
    for widget in ("causes_grid", "causes_row", "causes_col"):
        st.session_state["_" + widget] = st.session_state[widget]
    url.put(**{spec.key: None for spec in (url.PATCH_GRID, url.PATCH_ROW, url.PATCH_COL)})


def pick_cell(ckpt, info: dict, pair) -> tuple[str, int, int]:
    """The picked cell: grid, row and column (0-based), each a select box kept in the URL."""
    c1, c2, c3 = st.columns([2, 1, 1])
    url.seed(url.PATCH_GRID, "causes_grid", "encoder_resid", options=list(GRID_NAMES))
    grid = c1.selectbox("Cell: grid", list(GRID_NAMES), key="causes_grid", format_func=GRID_NAMES.get)
    url.write(url.PATCH_GRID, "causes_grid", grid)
    rows, cols = _seed_cell(ckpt, info, pair, grid)                   # row and column 1-based, clamped
    row = c2.selectbox("row", range(1, len(rows) + 1), key="causes_row", format_func=lambda i: rows[i - 1])
    col = c3.selectbox("column", range(1, len(cols) + 1), key="causes_col", format_func=lambda i: cols[i - 1])
    url.write(url.PATCH_ROW, "causes_row", row)
    url.write(url.PATCH_COL, "causes_col", col)
    return grid, row - 1, col - 1


def weak_difference_note(ld: dict) -> str | None:
    """A warning when the clean and corrupted runs barely disagree: each cell is divided by their gap."""
    gap = ld["clean"] - ld["corrupt"]
    if gap >= WEAK_GAP:
        return None
    return (f"The two runs barely disagree at this position: their logit differences are only {gap:.2f} apart "
            f"(under {WEAK_GAP}), and every cell below is divided by that gap, so small changes look "
            "like large shares. A pair whose translations part more clearly (another swap, or your own "
            "corrupted sentence) gives grids that can be trusted.")


def grids_section(ckpt, clean: str, corrupt: str, pair, info: dict, chosen: str, name: str) -> None:
    """The figures of the computed grids and the picked cell's patched translation."""
    result = computed_grids(ckpt, clean, corrupt, pair, info)
    if result is None:
        return
    ld = result.logit_difference
    # on a projector the grids come first (webapp.presenter.areas), then what a cell means and the picked cell
    parts = presenter.areas(lecture=("figures", "measure", "cell"), study=("measure", "cell", "figures"))
    with parts["measure"]:
        st.caption(f"Logit difference log p(clean token) − log p(corrupted token): clean run {ld['clean']:.2f}, "
                   f"corrupted run {ld['corrupt']:.2f}. Each cell is one patched run: 0 = the patch does nothing, "
                   "1 = all of it.")
        note = weak_difference_note(ld)
        if note:
            st.warning(note)
    grids = {g: np.asarray(result.grids[g][chosen]) for g in GRIDS}
    with parts["cell"]:
        grid, row, col = pick_cell(ckpt, info, pair)
        show_patched(ckpt, clean, corrupt, pair, info, (grid, row, col), float(grids[grid][row, col]), chosen)
    with parts["figures"]:
        _figures(ckpt, clean, corrupt, pair, info, result, grids, (grid, row, col), chosen, name)


def _figures(ckpt, clean: str, corrupt: str, pair, info: dict, result, grids: dict, cell: tuple[str, int, int],
             chosen: str, name: str) -> None:
    """The grids (the picked cell marked), the changed word's bars and the grids' JSON."""
    grid, row, col = cell
    ld = result.logit_difference
    limit = plots.colour_limit(*grids.values())
    picked = (row, col)
    st.caption("Click a cell of a grid (or pick it in the Cell boxes) to see its patched run's translation.")
    for g, key in (("encoder_resid", "causes_encoder"), ("decoder_resid", "causes_decoder")):
        rows, cols = labels(ckpt, info, pair, g)
        fig = plots.position_grid(grids[g], rows, cols, GRID_NAMES[g], chosen, picked if grid == g else None, limit,
                                  clickable=True)
        clickable_chart(fig, downloads.file_stem(name, "patching", g, chosen), key, (g,))
    heads = {g: grids[g] for g in HEAD_GRIDS}
    titles = {g: HEAD_TITLES[g] for g in HEAD_GRIDS}
    fig = plots.heads_grid(heads, titles, chosen, (grid, row, col) if grid in heads else None, limit, clickable=True)
    clickable_chart(fig, downloads.file_stem(name, "patching", "heads", chosen), "causes_heads", tuple(heads))
    word = " ".join(info["src_pieces"][i] + "/" + info["corrupt_pieces"][i] for i in pair.changed)
    downloads.chart(plots.changed_bars(grids["changed"][:, 0], row_labels(ckpt.model, "changed"), word, chosen),
                    downloads.file_stem(name, "patching", "changed", chosen), key="causes_changed")
    downloads.bundle_button(lambda: downloads.jsonable({
        "clean": clean, "corrupt": corrupt, "changed": pair.changed, "position": pair.position, **info,
        "logit_difference": ld, "grids": {g: {"rows": labels(ckpt, info, pair, g)[0], "columns": labels(ckpt, info, pair, g)[1],
                                              **result.grids[g]} for g in GRIDS}}),
        downloads.file_stem(name, "patching"), key="causes_bundle", label="Download the grids (JSON)")


def clickable_chart(fig, name: str, key: str, panels: tuple[str, ...]) -> None:
    """A grid figure (with plots.patching's click targets: the last len(panels) traces, one per panel of
    grids `panels`) whose clicked cell becomes the picked one: the select boxes take it before the rerun."""
    def clicked() -> None:
        points = st.session_state[key].selection.points if key in st.session_state else []
        first = len(fig.data) - len(panels)
        for point in points:
            panel = int(point.get("curve_number", -1)) - first
            if 0 <= panel < len(panels) and "x" in point and "y" in point:
                st.session_state["causes_grid"] = panels[panel]
                st.session_state["causes_row"], st.session_state["causes_col"] = int(point["y"]) + 1, int(point["x"]) + 1
                return
    downloads.chart(fig, name, key=key, on_click=clicked)


def show_patched(ckpt, clean: str, corrupt: str, pair, info: dict, cell: tuple[str, int, int], value: float,
                 chosen: str) -> None:
    grid, row, col = cell
    target = grid_cells(ckpt.model, pair, grid)[row][col]
    found = state.friendly(analyses.patched_translation, ckpt, clean, corrupt, target.point,
                           tuple(target.index or ()), chosen, what="The patched run's translation")
    if found is None:
        return
    pieces, text = found
    rows, cols = labels(ckpt, info, pair, grid)
    run = "corrupted" if chosen == "denoise" else "clean"
    st.markdown(f"**The picked cell** ({state.md_escape(GRID_NAMES[grid])}: {state.md_escape(rows[row])}, "
                f"{state.md_escape(cols[col])}): {round(value, 3) + 0.0:.3f}.  \n**The {run} run with it patched translates as:** "
                f"{state.md_escape(text or '(empty)')}")
    st.caption("Decoded greedily after the shared output, with the patch on the first pass through its point "
               "(later decoder steps are not patched: the other run has no activations there).")
