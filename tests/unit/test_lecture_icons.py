"""The sidebar's page icons (webapp.lecture.PAGES_TABLE) need no emoji font: each is None or one of
Streamlit's Material icons (":material/<name>:", drawn in the font Streamlit ships). An emoji is drawn
from the machine's emoji font, and on a lecture-room machine without one the Translate page's 🌐 was an
empty box (tests/browser/test_narrow_layouts_browser.py looks at the sidebar itself)."""
from __future__ import annotations

import re

from webapp import lecture

MATERIAL = re.compile(r":material/[a-z0-9_]+:")


def test_every_page_icon_is_none_or_a_material_icon():
    icons = {entry.title: entry.icon for entry in lecture.PAGES_TABLE}
    assert all(icon is None or MATERIAL.fullmatch(icon) for icon in icons.values()), icons
