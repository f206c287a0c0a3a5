"""Text from files is shown as text: webapp.text_safety's escapes, checked against what renders it.

Streamlit renders captions, alerts, widget labels and st.table cells as Markdown with its own
additions (LaTeX between $, :color[...] directives, :emoji: and :material/icon: shortcodes, which
are replaced in the text after the Markdown escapes are read); plotly renders a subset of HTML.
"""
from __future__ import annotations

import re
import string

import pandas as pd
import pytest

from webapp.text_safety import JOINER, md_escape, md_cells, plot_escape

HOSTILE = [
    "![x](http://127.0.0.1:8899/p.png)",
    "[link](http://127.0.0.1:8899/) <http://127.0.0.1:8899/> www.example.com a@example.com",
    "<img src=x onerror=alert(1)> <b>bold</b> &amp; &#60;",
    ":red[x] :blue-background[y] :small[z] :smile: :+1: :material/home: :streamlit:",
    "$x$ $$y$$ \\(z\\)",
    "# heading\n- item\n1. one\n> quote\n```\ncode\n```\n---\nsetext\n===\n| a | b |",
    "*em* **strong** _u_ ~~s~~ `code` \\ back\\slash",
]


PUNCTUATION = r"!-/:-@\[-`{-~"                       # ASCII punctuation: what CommonMark lets a backslash escape


def unescaped(markdown: str) -> str:
    """The text a CommonMark renderer shows for `markdown` made only of escapes and plain text."""
    return re.sub(rf"\\([{PUNCTUATION}])", r"\1", markdown)


@pytest.mark.parametrize("text", HOSTILE)
def test_every_markdown_character_is_backslash_escaped(text):
    escaped = md_escape(text).replace(JOINER, "")
    assert re.fullmatch(rf"(?:\\[{PUNCTUATION}]|[^{PUNCTUATION}])*", escaped), escaped
    assert unescaped(escaped).replace("  \n", "\n") == text


@pytest.mark.parametrize("text", HOSTILE)
def test_no_shortcode_survives_in_the_shown_text(text):
    """Streamlit's emoji, icon and logo shortcodes are matched in the text after escapes are read
    (remark-emoji's :[\\w-]+:, :material_(\\w+):, :streamlit:), so escaping the colon is not enough."""
    shown = unescaped(md_escape(text))
    assert not re.search(r":[\w+-]+:", shown), shown
    assert ":material/" not in md_escape(text) and ":material_" not in shown
    assert not re.search(r"(?<!\\):[A-Za-z]", md_escape(text))       # no :name[...] directive can start


@pytest.mark.parametrize("text", HOSTILE)
def test_a_markdown_renderer_shows_the_original_characters(text):
    markdown_it = pytest.importorskip("markdown_it")
    import html as html_lib
    rendered = markdown_it.MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(
        md_escape(text))
    assert not re.search(r"<(?!/?p>|br ?/?>)", rendered), rendered           # no tag but paragraphs and breaks
    body = re.sub(r"</?p>|<br ?/?>", "", rendered).replace(JOINER, "")
    assert html_lib.unescape(body).split() == text.split()


def test_non_strings_and_plain_text():
    assert md_escape(3) == "3"
    assert md_escape("plain words") == "plain words"
    assert md_escape("Licence: MIT, 10:30") == "Licence\\: MIT\\, 10\\:" + JOINER + "30"
    assert md_escape("https://host/x") == "https\\:\\/\\/host\\/x"            # no joiner inside a URL's "://"


def test_table_cells_are_escaped_and_plot_text_is_html_escaped():
    frame = pd.DataFrame({"source": ["![x](y)", None], "n": [1, 2]})
    cells = md_cells(frame)
    assert cells["source"][0] == md_escape("![x](y)") and cells["n"].tolist() == [1, 2]
    assert pd.isna(cells["source"][1])
    assert plot_escape("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"


@pytest.mark.parametrize("control", ["\u202a", "\u202b", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"])
def test_a_direction_control_is_shown_by_its_code_point_and_turns_nothing_around(control):
    """A config's target language 'de\\u202e' reversed the rest of the sidebar's caption and the picker's label."""
    from webapp.state import checkpoint_label
    from explorer.store.catalog import CheckpointInfo

    text = f"de{control} · step 5"
    for shown in (md_escape(text), plot_escape(text)):
        assert control not in shown and f"U+{ord(control):04X}" in shown.replace("\\", ""), shown
    info = CheckpointInfo(path="x", name=f"run{control}", meta={"src_lang": "en", "tgt_lang": f"de{control}"})
    assert control not in checkpoint_label(info)
    assert md_escape("שָׁלוֹם \u200f hello") == "שָׁלוֹם \u200f hello"      # a direction hint mark and RTL text stay
