"""Links into the Graphs page from the pages that show a translation's words ("how was this word made?"):
the sentence, the decoding settings that made the translation and the word's position travel in the link,
so the Graphs page decodes the same translation and opens on that word's graph.

One place for the link, so the Translate and Beam search pages each add one call.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import streamlit as st

from webapp import decode_url, lecture
from webapp import url_keys as url

GRAPHS_PAGE = "webapp/pages/graphs.py"


def query(position: int, cfg: Mapping | None = None) -> dict[str, str]:
    """The link's URL keys: the shared state, the decoding settings `cfg` when given (the Beam page's own
    beam size, penalty and alpha), and the word, 1-based."""
    carried = lecture.carried_query()
    if cfg is not None:
        for key, value in decode_url.to_query(cfg, decode_url.DEFAULT_SAMPLES).items():
            carried.pop(key, None)
            if value is not None:
                carried[key] = value
    return {**carried, url.GRAPH_WORD.key: str(position + 1)}


def word_link(position: int, piece: str, cfg: Mapping | None = None) -> None:
    """The link for output word `position` (0-based), `piece` its text."""
    word = piece.replace("▁", "").strip() or piece
    st.page_link(GRAPHS_PAGE, label=f"How was “{word}” made? Its attribution graph",
                 icon=":material/account_tree:", query_params=query(position, cfg))


def word_picker(pieces: Sequence[str], key: str) -> None:
    """A word of the translation picked, and its link (the Translate page)."""
    if not pieces:
        return
    left, right = st.columns([1, 2], vertical_alignment="bottom")
    # The options are the words themselves: as numbers 0..n-1 they stayed the same options from one translation
    # to the next, and the browser kept showing the last translation's word beside this one's link.
    labels = [f"{i + 1}. {piece}" for i, piece in enumerate(pieces)]
    if st.session_state.get(key) not in labels:
        st.session_state.pop(key, None)                  # another translation: its first word
    chosen = left.selectbox("How was this word made?", labels, key=key)
    k = labels.index(chosen)
    with right:
        word_link(k, pieces[k])
