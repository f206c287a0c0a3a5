"""The Beam search page's contrast: why the search's hypothesis wrote its token at a step and not a foil
(Yin & Neubig 2022), by gradient x input and integrated gradients, beside the plain attribution of the
chosen token (explorer.studies.contrastive through webapp.analyses.contrast, cached per checkpoint).

The foil is a candidate the same parent could have written (a kept or pruned node of the tree, or an
alternative the trace recorded), picked in a list or by a click on the tree, or a typed word (its first
target piece: explorer.studies.contrastive.foils says why, and refuses what cannot be contrasted). A click on a
node of the tree picks its step and makes it the foil of its best sibling (the hypothesis on the best
path, else a kept one), or explains it against its best alternative when it is on the best path itself.
Off until asked (a toggle), so stepping through the search stays as fast as it was. Under the figure, how
faithful its two attributions are over the source (webapp.analyses.contrast_faithfulness: the pieces they
rank highest removed or kept, beside random orders; a fraction of a second on the shipped models).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from explorer.studies.common.gradients import IG_STEPS
from explorer.studies.contrastive.foils import foil_from_id, foil_from_word, step_of
from explorer.decoding.beam_trace import FINISHED, KEPT, STATUSES
from explorer.plots import contrastive as plots
from webapp import analyses, downloads, presenter, state
from webapp import url_keys as url
from webapp.views import contributions

TOGGLE, WORD, METHOD, POINTS = "beam_contrast", "beam_foil_word", "beam_contrast_method", "beam_ig_points"
METHODS = {"integrated-gradients": "integrated gradients", "grad-x-input": "gradient x input"}
IG_CHOICES = (16, 32, 64, 128)
UNSELECTED_TEXT = "#31333f"        # the node labels' colour (Streamlit's text), kept after a click
TYPED_CHARS = 200                  # a link's typed foil is cut here (a foil is one word: the check refuses > 60)


def foil_key(tag: str, row: int) -> str:
    """The foil list's widget key: one per hypothesis (their lists differ)."""
    return f"beam_foil_{tag}_{row}"


def row_key(step: int, tag: str) -> str:
    """The page's "Hypothesis at this step" widget key (webapp.views.beam.step_view)."""
    return f"beam_row_{step}_{tag}"


def picked_from_tree(trace, row: int) -> tuple[int, int | None]:
    """(the hypothesis row to explain, the foil's token or None) for a click on tree row `row`: a node on
    the best path is explained against its best alternative (None: the list's first); another node is
    the foil of its best sibling (same step, same parent): the one on the best path, else a kept or
    finished one, else the best ranked; a node without siblings is explained itself."""
    cand, best = trace.candidates, set(trace.best_path())
    if row in best:
        return row, None
    step, parent = int(cand["step"][row]), int(cand["parent"][row])
    siblings = [int(r) for r in trace.step_rows(step) if int(cand["parent"][r]) == parent and int(r) != row]
    ranked = ([r for r in siblings if r in best] + [r for r in siblings if cand["status"][r] in (KEPT, FINISHED)]
              + siblings)
    return (ranked[0], int(cand["token"][row])) if ranked else (row, None)


def undimmed(fig) -> None:
    """A clicked node stays selected in the browser, and plotly then fades every other node and its label
    to a fifth: the tree would go grey after one click. The tree is a map, not a selection, so nodes keep
    their look (the contrast below says which node was picked)."""
    fig.update_traces(selector=lambda t: "markers" in (t.mode or ""),
                      unselected=dict(marker=dict(opacity=1), textfont=dict(color=UNSELECTED_TEXT)))


def tree_click(fig, trace, tag: str, key: str):
    """The tree chart's on_click: the clicked node (its trace's customdata holds the row) becomes the
    step, the hypothesis and the foil shown below, and the contrast opens."""
    def clicked() -> None:
        point = downloads.clicked_point(key)
        curve, index = (int(point.get("curve_number", -1)), point.get("point_index")) if point else (-1, None)
        if not 0 <= curve < len(fig.data) or fig.data[curve].name not in STATUSES or index is None:
            return
        row = int(fig.data[curve].customdata[int(index)][0])
        chosen, foil = picked_from_tree(trace, row)
        step = int(trace.candidates["step"][chosen])
        st.session_state["beam_step"] = step + 1
        st.session_state[row_key(step, tag)] = chosen
        st.session_state[TOGGLE] = True
        if foil is not None:
            st.session_state[foil_key(tag, chosen)] = foil
            st.session_state[WORD] = ""
    return clicked


def contrast_section(ckpt, result, trace, row: int, step: int, piece, tag: str) -> None:
    """The toggle, the foil and method controls, and the two attributions side by side."""
    st.subheader("Why this token and not another")
    url.seed(url.CONTRAST, TOGGLE, False, options=(False, True))
    on = st.toggle("Explain the chosen hypothesis's token against a foil", key=TOGGLE,
                   help="A click on a node of the tree (a kept or pruned candidate) also picks it as the foil.")
    url.write(url.CONTRAST, TOGGLE, on)
    if not on:                                  # its controls are not drawn: the URL keeps none of their values
        url.put(**{key.key: None for key in (url.FOIL, url.FOIL_WORD, url.CONTRAST_METHOD, url.IG_POINTS)})
        st.caption("Contrastive attribution (Yin & Neubig 2022): which source words and which words already "
                   "written made the model prefer its token to another. Turn it on, or click a node of the tree.")
        return
    found = step_of(trace, row)
    options = [t for t, _ in found.alternatives]
    if not options:
        st.info("The trace recorded no other token for this hypothesis: type a word as the foil.")
    status = _sibling_status(trace, row)
    logp = dict(found.alternatives)
    by_place = {str(i): t for i, t in enumerate(options, 1)}           # the URL holds the 1-based place
    cols = st.columns([3, 2] + ([2, 1] if presenter.advanced() else [2]))
    widget = foil_key(tag, row)
    if options:
        url.seed(url.FOIL, widget, options[0], options=by_place)
        token = cols[0].selectbox("Foil: another token this hypothesis could have written", options, key=widget,
                                  format_func=lambda t: f"{piece(t)}  (log p {logp[t]:.2f}, {status.get(t, 'not ranked')})")
        url.write(url.FOIL, widget, token, options=by_place)
    else:
        token = None
        url.put(**{url.FOIL.key: None})
    _seed_word()
    typed = cols[1].text_input("…or type a word", key=WORD,
                               help="Contrasted through its first target piece: one step writes one piece.")
    url.put(**{url.FOIL_WORD.key: typed.strip() or None})
    st.session_state["_" + WORD] = typed
    url.seed(url.CONTRAST_METHOD, METHOD, "integrated-gradients", options=tuple(METHODS))
    method = cols[2].radio("Method", tuple(METHODS), key=METHOD, format_func=METHODS.get)
    url.write(url.CONTRAST_METHOD, METHOD, method)
    steps = IG_STEPS
    if presenter.advanced():
        url.seed(url.IG_POINTS, POINTS, IG_STEPS, options=IG_CHOICES)
        steps = cols[3].selectbox("IG points", IG_CHOICES, key=POINTS)
        url.write(url.IG_POINTS, POINTS, steps)
    else:                                       # presenter mode: the default, not a link's
        url.put(**{url.IG_POINTS.key: None})
    foil = _foil(ckpt, found.chosen, typed, token)
    if foil is None:
        return
    if foil.note:
        st.info(state.md_escape(foil.note))
    both = state.friendly(analyses.contrast, ckpt, tuple(result.src_ids), tuple(found.prefix), found.chosen,
                          foil.token, steps, what="The contrastive attribution")
    if both is not None:
        show(ckpt, result, found, both, method, piece, tag)
        faithfulness(ckpt, result, found, foil.token, steps, method, piece)


def _seed_word() -> None:
    """The typed foil's start value: a link's word (cut to TYPED_CHARS), else what the box held. Not
    url.seed: it strips text, and a blank word must reach the foil check to be refused with a message."""
    raw, held = url.linked(url.FOIL_WORD), st.session_state.get(WORD)
    if raw is not None:
        url.hold(WORD, str(raw)[:TYPED_CHARS])
    else:
        url.hold(WORD, held if isinstance(held, str) else st.session_state.get("_" + WORD, ""))


def _foil(ckpt, chosen: int, typed: str, token):
    """The Foil to contrast, or None after a message saying why there is none."""
    try:
        if typed:                          # blank but not empty (spaces) is a hostile word, refused with a message
            return foil_from_word(ckpt.model, ckpt.tokenizer, typed, chosen)
        if token is None:
            st.info("Type a word to contrast with.")
            return None
        return foil_from_id(ckpt.model, int(token), chosen, ckpt.tokenizer)
    except ValueError as err:
        st.warning(f"This foil cannot be contrasted: {state.md_escape(err)}")
        return None


def _sibling_status(trace, row: int) -> dict[int, str]:
    """token -> what became of it at this step (kept, pruned, finished...) among the same parent's candidates."""
    cand = trace.candidates
    rows = trace.step_rows(int(cand["step"][row]))
    mine = rows[cand["parent"][rows] == cand["parent"][row]]
    return {int(cand["token"][r]): STATUSES[int(cand["status"][r])] for r in mine}


def show(ckpt, result, found, both: dict, method: str, piece, tag: str) -> None:
    """The chosen method's figure (contrast beside plain), completeness, and both methods as a table."""
    picked = both[method]
    chosen, foil = piece(found.chosen), piece(picked.foil)
    prefix = " ".join(piece(t) for t in found.prefix) or "(nothing yet)"
    st.markdown(f"After **{state.md_escape(prefix)}** the model wrote **{state.md_escape(chosen)}** "
                f"(log p {picked.chosen_logprob:.3f}) rather than **{state.md_escape(foil)}** (log p "
                f"{picked.foil_logprob:.3f}): the contrast log p(chosen) − log p(foil) is "
                f"**{picked.chosen_logprob - picked.foil_logprob:.3f}**.")
    tgt_inputs = ["<s>"] + [piece(t) for t in found.prefix]
    contrast = np.concatenate([picked.contrast.source, picked.contrast.target])     # [S + P + 1]
    plain = np.concatenate([picked.plain.source, picked.plain.target])
    name = METHODS[method]
    fig = plots.attribution_figure(result.src_pieces, tgt_inputs, contrast, plain,
                                   f"Why '{chosen}' and not '{foil}' ({name})",
                                   f"contrast: log p({chosen}) − log p({foil})", f"plain: log p({chosen})")
    downloads.chart(fig, downloads.file_stem(ckpt.name, "contrast", method), key="beam_contrast_chart")
    st.caption("Red: what moves the choice between the two tokens (the softmax's normaliser cancels). Grey: "
               "the plain attribution of the chosen token, which also carries whatever moves every token's "
               "probability. Left of the dotted line the source pieces, right of it what the decoder read.")
    st.markdown(completeness_text(picked))
    if presenter.advanced():
        table = table_of(result.src_pieces, tgt_inputs, both)
        with st.expander("Both methods as a table"):
            st.dataframe(table, hide_index=True, key="beam_contrast_table")
        downloads.table_csv_button(table, downloads.file_stem(ckpt.name, "contrast"), key="beam_contrast_csv",
                                   label="Attributions as CSV")


def faithfulness(ckpt, result, found, foil: int, steps: int, method: str, piece) -> None:
    """How faithful the drawn contrast and plain attributions are over the source pieces: the contrast
    measured on log p(chosen) − log p(foil), the plain one on log p(chosen), each beside random orders."""
    with st.spinner("Scoring the step on edited sources…"):
        measured = state.friendly(analyses.contrast_faithfulness, ckpt, tuple(result.src_ids), tuple(found.prefix),
                                  found.chosen, foil, steps, method, what="The faithfulness of these attributions")
    if not measured:
        return
    chosen, other = state.md_escape(piece(found.chosen)), state.md_escape(piece(foil))
    st.markdown("**How faithful are these attributions over the source?**")
    labels = {"contrast": f"contrast ({METHODS[method]}), on log p(chosen) − log p(foil)",
              "plain": f"plain ({METHODS[method]}), on log p(chosen)"}
    entries = [(labels[part], mine, found_part["random"]) for part, found_part in measured.items()
               for mine in found_part["rankings"].values()]
    first = next(iter(measured.values()))
    contributions.faithfulness_table(
        entries, contributions.faithfulness_caption(
            first, "source pieces", f"the function each explains (the contrast log p(“{chosen}”) − log p(“{other}”), "
            f"or log p(“{chosen}”))", " at this one step; the decoder's inputs are not removed"),
        downloads.file_stem(ckpt.name, "contrast_faithfulness", method), "beam_contrast_faith")


def completeness_text(picked) -> str:
    """Integrated gradients' completeness in words (their sum against F(input) − F(baseline))."""
    if picked.contrast.delta is None:
        return ("Gradient x input is a first-order reading: its sum "
                f"({picked.contrast.total:.3f}) need not equal the contrast.")
    parts = []
    for what, a in (("contrast", picked.contrast), ("plain", picked.plain)):
        parts.append(f"{what}: sum {a.total:.3f} vs F(input) − F(baseline) {a.value - a.baseline:.3f}, "
                     f"error {100 * a.completeness_error:.1f}%")
    hint = (" Off by more than 5%: the path from the baseline bends sharply at this step, and more points do not "
            "always close the gap (docs/SEARCH.md), so read the bars as approximate."
            if picked.contrast.completeness_error > 0.05 else "")
    return (f"**Completeness** of integrated gradients at {picked.steps} points (the attributions should add up "
            "to the function's change from the zero baseline): " + "; ".join(parts) + "." + hint)


def table_of(src_pieces, tgt_inputs, both: dict) -> pd.DataFrame:
    """One row per input token (1-based in its part), a column per method and function."""
    frame = pd.DataFrame({"part": ["source"] * len(src_pieces) + ["decoder input"] * len(tgt_inputs),
                          "position": list(range(1, len(src_pieces) + 1)) + list(range(1, len(tgt_inputs) + 1)),
                          "token": list(src_pieces) + list(tgt_inputs)})
    for method, res in both.items():
        frame[f"{METHODS[method]}: contrast"] = np.concatenate([res.contrast.source, res.contrast.target])
        frame[f"{METHODS[method]}: plain"] = np.concatenate([res.plain.source, res.plain.target])
    return frame
