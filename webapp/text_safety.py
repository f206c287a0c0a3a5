"""Text from files shown as text: never read as Markdown, HTML, LaTeX, a colour or an emoji.

Why: much of what the app shows was written by someone else: a model's config.json and card.json
(and the tokenizer_config.json and README an import copies from), its vocabulary, gold files and
their uploaded names, run folders and their status and metrics files. Streamlit renders st.markdown,
st.caption, the alerts, headings, widget labels, help, radio and select-slider options, tabs and
st.table cells as GitHub-flavoured Markdown plus its own additions: LaTeX between `$`, `:color[...]`
directives, `:emoji:`, `:material/icon:` and `:streamlit:` shortcodes. A source language of
`![x](http://host/p.png)` would make every student's browser fetch that address. Plotly renders a
subset of HTML (links, `<b>`, `<br>`, styles) in titles, labels, legends and hover text.

So every such string goes through md_escape() before it is put in Markdown, and plot_escape()
before it is put in a figure. Where Streamlit shows plain text (selectbox and multiselect options,
st.dataframe cells, st.code, st.text, text box values) strings go unchanged: an escape would show.
"""
from __future__ import annotations

import html
import re
import string

import pandas as pd

JOINER = "\u2060"         # WORD JOINER: invisible, no width, no line break; not a word character
_PUNCTUATION = re.compile("([" + re.escape(string.punctuation) + "])")
# Streamlit's emoji (remark-emoji: ":[\w-]+:", ":+1:"), icon (":material_name:") and logo (":streamlit:")
# shortcodes are looked for in the text after Markdown has read its escapes, so "\:smile\:" still
# becomes an emoji; an invisible joiner after every colon that could open one breaks them all.
_SHORTCODE_START = re.compile(r":(?=[A-Za-z0-9_+\-])")
# Unicode's explicit direction controls (embeddings, overrides, isolates and their ends): invisible, and one
# left open turns the rest of its line around ("de\u202e" in a config's target language reversed the
# sidebar's caption and the picker's label after it). Shown by their code point instead.
_DIRECTION_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def visible_controls(text: object) -> str:
    """`text` with each explicit direction control written as ⟨U+202E⟩: for text shown as it is (a picker's
    label) as much as for Markdown. The marks that only hint a direction (U+200E, U+200F) stay."""
    return _DIRECTION_CONTROLS.sub(lambda m: f"⟨U+{ord(m.group()):04X}⟩", str(text))


def shortened(text: object, limit: int = 80) -> str:
    """`text` cut to `limit` characters with an ellipsis: a value a link brings is echoed back in a message,
    and a link may carry 100,000 characters."""
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "…"


def md_escape(text: object) -> str:
    """`text` as Markdown that Streamlit shows character for character.

    Every ASCII punctuation character gets a backslash (CommonMark shows `\\x` as x for each of
    them, and they are all the characters Markdown, HTML, LaTeX and Streamlit's directives are made
    of); a colon that could start a shortcode is followed by an invisible word joiner; a line break
    stays a line break (two spaces before it) instead of joining the lines; a direction control is shown
    by its code point (visible_controls).
    """
    escaped = _PUNCTUATION.sub(r"\\\1", _SHORTCODE_START.sub(":" + JOINER, visible_controls(text)))
    return escaped.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "  \n")


def md_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """A table for st.table, whose cells are Markdown: every text cell escaped, other values kept."""
    return frame.map(lambda v: md_escape(v) if isinstance(v, str) else v)


def plot_escape(text: object) -> str:
    """`text` as plotly text (titles, labels, legend names, hover text): HTML-escaped, as
    explorer.plots.style.label does for tokens."""
    return html.escape(visible_controls(text), quote=False)
