"""Presenter mode: the app as a teacher shows it on a projector during a lecture.

Why a mode rather than separate pages: the lecture uses the same pages a student explores, only
read from the back of a room. Presenter mode is a projector layout: larger type (figures' text too),
the sidebar collapsed and the page full width, figures stacked rather than side by side on a narrow
screen, every "Learn" panel folded (one click opens it), each page's result placed before its Learn panel
and inputs (areas()) so that its main figure starts on the first screen at 1024x768, tables fitted to the
width (table_columns()), and the controls a lecture does not use hidden (listed in HELP), so the
slide-sized view holds what the teacher talks about. It is kept in the URL (?present=1), so a link prepared before the lecture
opens in presenter mode, and the "Next" links of the lecture order carry it (webapp.lecture).

Pages ask `advanced()` before drawing an advanced control: each hide is one line. Nothing here
imports webapp.state (state.learn reads `on()`), and the URL value is untrusted: anything but a
known "on" spelling means off, never an error.
"""
from __future__ import annotations

import textwrap
import unicodedata
from typing import Sequence

import streamlit as st

from explorer.plots.style import scale_text, state_theme_sizes
from webapp import url_keys

URL_KEY = url_keys.PRESENT.key  # ?present=1 (1, true, yes or on; anything else is off)
KEY = "presenter"              # the sidebar toggle's session key
HELP = (
    "For a lecture on a projector: larger type (figures too), the sidebar folded away (the arrow at the top "
    "left opens it), the page full width, every **Learn** panel folded and each page's result first (its "
    "Learn panel and inputs below it), tables fitted to the width (on **Checkpoints** without the run, size "
    "and date columns; on **Layers** each translation wrapped, whole), and these advanced controls "
    "hidden: the CSV and JSON download buttons on every page (a figure's camera button stays); on "
    "**Translate**, the token-id tables; on **Beam search**, the length penalty and α (the Translate "
    "page's are used); on **Architecture**, the full Q, K and V tables; on **Layers**, the DecoderLens "
    "beam size (a link's still applies); on **Attention**, the causal-mask switch except for decoder "
    "self-attention. Kept in the URL (`?present=1`), "
    "so a link prepared before the lecture opens in presenter mode; the **Next** links at the end of "
    "each page keep it.")
# Sizes on a projector. The smallest text anywhere on a page (body, captions, every figure's ticks and
# labels) is MIN_PX at 1024x768, which tests/browser/test_presenter_browser.py measures on every page.
ROOT_PX = 22                   # the root type size: Streamlit's 16 px x 1.375
SCALE = ROOT_PX / 16           # one factor for every figure's stated font sizes (figure())
MIN_PX = 16                    # no text smaller, plot text included
STACK_BELOW_PX = 1200          # side-by-side columns that hold a figure are stacked below this width
# The sizes Streamlit's plotly theme gives the text a figure leaves unset (0.75, 0.875 and 1 rem), at ROOT_PX.
THEME_PX = {"text": 0.75 * ROOT_PX, "axis_title": 0.875 * ROOT_PX, "title": 1.0 * ROOT_PX}
# Streamlit sizes its type in rem, so a larger root size enlarges all of it (offline: no web fonts); plotly
# figures take their unstated sizes from Streamlit's theme, which follows it too, and figure() scales the
# sizes a figure states. The sidebar starts collapsed (app.py), the page uses the whole width, and below
# STACK_BELOW_PX columns holding a figure are stacked, so a figure is never a narrow column beside another;
# a smaller title and closer elements bring each page's result up to the first screen.
CSS = f"""<style>
html {{ font-size: {ROOT_PX}px !important; }}
[data-testid="stMain"] .block-container {{ max-width: 100%; padding: 3.75rem 1.5rem 4rem 1.5rem; }}   /* under the 3.75rem header */
[data-testid="stMain"] p, [data-testid="stMain"] li {{ line-height: 1.5; }}
[data-testid="stMain"] h1 {{ font-size: 2.2rem; padding: 0 0 0.25rem 0; }}
[data-testid="stMain"] [data-testid="stVerticalBlock"] {{ gap: 0.6rem; }}
[data-testid="stMain"] code {{ font-size: max(0.85em, {MIN_PX}px); }}
@media (max-width: {STACK_BELOW_PX}px) {{
  [data-testid="stHorizontalBlock"]:has([data-testid="stPlotlyChart"]) {{ flex-wrap: wrap; }}
  [data-testid="stHorizontalBlock"]:has([data-testid="stPlotlyChart"]) > [data-testid="stColumn"] {{
    min-width: 100%; flex: 1 1 100%; }}
}}
</style>"""


def _from_url() -> bool:
    raw = url_keys.raw(url_keys.PRESENT)
    return raw is not None and url_keys.PRESENT.parse(raw) is True


def on() -> bool:
    """Is presenter mode on? The sidebar toggle's value; before it is drawn, the URL's."""
    value = st.session_state.get(KEY)
    return value if isinstance(value, bool) else _from_url()


def advanced() -> bool:
    """Draw advanced controls? False in presenter mode: `if presenter.advanced():` hides one."""
    return not on()


def sidebar_state() -> str:
    """st.set_page_config's initial_sidebar_state: collapsed in presenter mode (the page gets the whole
    projector; the arrow at the top left opens it), Streamlit's own choice otherwise."""
    return "collapsed" if on() else "auto"


def figure(fig):
    """`fig` as this mode draws it: in presenter mode every font size it states times SCALE, at least
    MIN_PX (explorer.plots.style.scale_text), and every size it leaves to the theme stated at the theme's
    presenter size (THEME_PX; explorer.plots.style.state_theme_sizes), so no figure's text depends on
    whether the larger type size applied before the chart first drew; unchanged otherwise. Called where
    figures are drawn (webapp.downloads.chart), so a page never sizes text for a projector itself."""
    return state_theme_sizes(scale_text(fig, SCALE, MIN_PX), THEME_PX) if on() else fig


def areas(lecture: Sequence[str], study: Sequence[str]) -> dict:
    """A container per part of a page, placed in the mode's order: `lecture` in presenter mode (the page's
    result first, so that it is on the projector's first screen; the Learn panel and the inputs after it),
    `study` otherwise (the Learn panel and the inputs, then the result). The same parts in both. Each part
    is then drawn in the script's own order, `with area[part]:`, so a part may use what another computed."""
    order = lecture if on() else study
    if sorted(order) != sorted(lecture) or sorted(lecture) != sorted(study):
        raise ValueError(f"both orders must name the same parts: {lecture} and {study}")
    return {part: st.container() for part in order}


# Tables (st.dataframe) are drawn on a canvas whose columns are as wide as their text: in presenter mode a
# table of many or long columns ran past the right edge of a 1024 px projector, the rest shown only by
# scrolling sideways. There a table shows the columns a lecture reads, at widths that add up to TABLE_PX at
# most (the content is 956 px wide at 1024 px, a table's border 2 px): a longer text is cut inside its cell
# (the table's toolbar shows it full screen), and on a wider screen Streamlit shares the room left among them.
# A column whose whole text a lecture reads (a translation) is wrapped instead: its rows made as tall as its
# longest text needs (st.dataframe wraps a cell's text in a row taller than one line), up to WRAP_LINES.
TABLE_PX = 920
CHAR_PX = 10.5                 # an average character of a table's text at ROOT_PX (measured: 9.6 px, with room)
LINE_PX = 26                   # a line of a table's text at ROOT_PX
CELL_PAD_PX = 18               # a cell's padding, across and down
WRAP_LINES = 6                 # at most: a longer text is cut, its full text in the table's full-screen view


def table_columns(widths: dict[str, int], config: dict | None = None,
                  wrap: dict[str, Sequence[str]] | None = None) -> dict:
    """st.dataframe's column_order and column_config for the mode: in presenter mode the columns named in
    `widths`, in its order, each about `widths[name]` px wide (scaled down to TABLE_PX in all); otherwise
    every column sized to its text. `config`: the page's own column_config (formats), kept in both.
    `wrap`: columns to show whole in presenter mode (name -> its texts): the rows as tall as the longest needs."""
    config = dict(config or {})
    if not on():
        return {"column_config": config} if config else {}
    scale = min(1.0, TABLE_PX / max(1, sum(widths.values())))
    for name, px in widths.items():
        config[name] = {**(config.get(name) or st.column_config.Column()), "width": int(px * scale)}
    lines = max([wrapped_lines(texts, int(widths[name] * scale)) for name, texts in (wrap or {}).items()
                 if name in widths], default=1)
    height = {"row_height": lines * LINE_PX + CELL_PAD_PX} if lines > 1 else {}
    return {"column_order": tuple(widths), "column_config": config, **height}


def wrapped_lines(texts: Sequence[str], width_px: int) -> int:
    """How many lines the longest of `texts` takes in a column `width_px` wide (at most WRAP_LINES): wrapped
    at spaces as the table wraps it, a wide (CJK) character counted as two."""
    per_line = max(1, int((width_px - CELL_PAD_PX) / CHAR_PX))
    widened = ("".join(c * 2 if unicodedata.east_asian_width(c) in "WF" else c for c in str(t)) for t in texts)
    return min(WRAP_LINES, max([len(textwrap.wrap(t, per_line)) or 1 for t in widened], default=1))


def toggle() -> bool:
    """The sidebar toggle (its start value from the URL), the URL kept in step, the CSS when on. Its value
    is set before it is drawn on every run: set once, a browser that missed that run's value (a page
    switched to at once) would show the toggle's own default, off, and send it back."""
    value = st.session_state.get(KEY)
    url_keys.hold(KEY, value if isinstance(value, bool) else _from_url())
    present = st.sidebar.toggle("Presenter mode", key=KEY, help=HELP)
    url_keys.put(**{URL_KEY: "1" if present else None})
    if present:
        st.html(CSS)               # style only: Streamlit puts it where it takes no space
    return present
