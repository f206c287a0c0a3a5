"""Presenter mode: the app as a teacher shows it on a projector during a lecture.

Why a mode rather than separate pages: the lecture uses the same pages a student explores, only
read from the back of a room. Presenter mode makes the type larger, opens every "Learn" panel and
hides the controls a lecture does not use (listed in HELP), so the slide-sized view holds what the
teacher talks about. It is kept in the URL (?present=1), so a link prepared before the lecture
opens in presenter mode, and the "Next" links of the lecture order carry it (webapp.lecture).

Pages ask `advanced()` before drawing an advanced control: each hide is one line. Nothing here
imports webapp.state (state.learn reads `on()`), and the URL value is untrusted: anything but a
known "on" spelling means off, never an error.
"""
from __future__ import annotations

import streamlit as st

URL_KEY = "present"            # ?present=1
KEY = "presenter"              # the sidebar toggle's session key
_ON = {"1", "true", "yes", "on"}
HELP = (
    "For a lecture on a projector: larger type, every **Learn** panel open, and these advanced controls "
    "hidden: the CSV and JSON download buttons on every page (a figure's camera button stays); on "
    "**Translate**, the token-id tables; on **Beam search**, the length penalty and α (the Translate "
    "page's are used); on **Architecture**, the full Q, K and V tables. Kept in the URL (`?present=1`), "
    "so a link prepared before the lecture opens in presenter mode; the **Next** links at the end of "
    "each page keep it.")
# Streamlit sizes its type in rem, so a larger root size enlarges all of it (offline: no web fonts).
# Plotly figures and data tables draw their own text at fixed sizes and stay as they are.
CSS = """<style>
html { font-size: 22px !important; }
[data-testid="stMain"] .block-container { max-width: 100%; padding-top: 2.5rem; }
[data-testid="stMain"] p, [data-testid="stMain"] li { line-height: 1.5; }
</style>"""


def _from_url() -> bool:
    raw = st.query_params.get(URL_KEY)
    return isinstance(raw, str) and raw.strip().lower() in _ON


def on() -> bool:
    """Is presenter mode on? The sidebar toggle's value; before it is drawn, the URL's."""
    value = st.session_state.get(KEY)
    return value if isinstance(value, bool) else _from_url()


def advanced() -> bool:
    """Draw advanced controls? False in presenter mode: `if presenter.advanced():` hides one."""
    return not on()


def toggle() -> bool:
    """The sidebar toggle (its start value from the URL), the URL kept in step, the CSS when on."""
    if not isinstance(st.session_state.get(KEY), bool):
        st.session_state[KEY] = _from_url()
    present = st.sidebar.toggle("Presenter mode", key=KEY, help=HELP)
    if present:
        st.query_params[URL_KEY] = "1"
        st.html(CSS)               # style only: Streamlit puts it where it takes no space
    elif URL_KEY in st.query_params:
        del st.query_params[URL_KEY]
    return present
