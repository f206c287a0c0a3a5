"""Layouts at the widths a lecture meets, measured in a real browser (headless Chromium) once the script
run ends, on the shipped numbers model (every Learn formula at 1024x768 is measured by the figures walk,
tests/browser/test_figures_draw_browser.py, and in presenter mode by the lecture walk):

- the Attention page at 1024x768 on a laptop: the zoomed head is not a narrow column beside the all-heads
  grid (it was 274 px wide, its title cut and its key labels touching): at least FULL_WIDTH of the page's
  content, its title inside it, no two key labels overlapping;
- the Training vs inference page at 1400x900: the causal mask's key labels neither overlap each other nor
  its title, which stays inside the figure (in a third of the width the labels piled up into the title);
- the sidebar shows no emoji icon, which a machine without an emoji font draws as an empty box (the
  Translate page's was one; tests/unit/test_lecture_icons.py holds every page's icon to None or a Material
  icon, drawn in Streamlit's own font).
"""
from __future__ import annotations

import pytest

from browser_support import ARTIFACTS, LONG, NUMBERS, ROOT, idle, open_app
from test_figures_draw_browser import wait_drawn
from test_presenter_browser import FULL_WIDTH, LAYOUT

pytestmark = pytest.mark.skipif(not (ROOT / "checkpoints" / NUMBERS / "model.safetensors").is_file(),
                                reason=f"needs checkpoints/{NUMBERS}")

TEXT = "three hundred and twenty one"
LAPTOP, WIDE = {"width": 1024, "height": 768}, {"width": 1400, "height": 900}
SHOTS = ARTIFACTS / "narrow"
# A chart's box, its title's and its x tick labels' (px from the window's top left).
BOXES = """key => {
  const plot = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  const box = el => { const b = el.getBoundingClientRect();
    return {text: el.textContent, left: b.left, top: b.top, right: b.right, bottom: b.bottom}; };
  const title = plot.querySelector('.gtitle');
  return {figure: box(plot), title: title ? box(title) : null, ticks: [...plot.querySelectorAll('g.xtick text')].map(box)};
}"""
SLACK = 0.5                    # px: boxes that only touch do not overlap


def overlap(a: dict, b: dict) -> bool:
    return (a["left"] < b["right"] - SLACK and b["left"] < a["right"] - SLACK
            and a["top"] < b["bottom"] - SLACK and b["top"] < a["bottom"] - SLACK)


def label_problems(found: dict, where: str) -> list[str]:
    """Key labels that overlap each other or the title; a title that is not inside its figure."""
    ticks, title, figure = found["ticks"], found["title"], found["figure"]
    out = [f"{where}: key labels {a['text']!r} and {b['text']!r} overlap"
           for i, a in enumerate(ticks) for b in ticks[i + 1:] if overlap(a, b)]
    if title is not None:
        out += [f"{where}: the title overlaps the key label {t['text']!r}" for t in ticks if overlap(title, t)]
        if title["left"] < figure["left"] - SLACK or title["right"] > figure["right"] + SLACK:
            out.append(f"{where}: the title {title['text']!r} ({title['left']:.0f}-{title['right']:.0f} px) is cut "
                       f"at the figure's edges ({figure['left']:.0f}-{figure['right']:.0f} px)")
    return out


def open_page(visit, window: dict, path: str, present: bool = False):
    page = visit.page
    page.set_viewport_size(window)
    query = dict(ckpt=NUMBERS, text=TEXT, **({"present": "1"} if present else {}))
    page = open_app(visit, path, **query)
    wait_drawn(page)
    return page


def test_the_zoomed_head_is_not_a_narrow_column_at_1024(visit):
    page = open_page(visit, LAPTOP, "attention")
    page.wait_for_selector(".st-key-attn_zoom g.xtick text", timeout=LONG)
    layout, found = page.evaluate(LAYOUT), page.evaluate(BOXES, "attn_zoom")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(".st-key-attn_zoom").screenshot(path=str(SHOTS / "attention_zoom_1024.png"))
    assert layout["sidebar"] > 1, "the sidebar is open on a laptop"
    width = found["figure"]["right"] - found["figure"]["left"]
    problems = label_problems(found, "the zoomed head")
    if width < FULL_WIDTH * layout["content"]:
        problems.append(f"the zoomed head is {width:.0f} px wide in {layout['content']:.0f} px of content")
    assert not problems, "\n".join(problems)
    visit.assert_offline_and_quiet()


def test_the_causal_masks_labels_do_not_pile_up_at_1400(visit):
    page = open_page(visit, WIDE, "training_vs_inference")
    page.wait_for_selector(".st-key-tvi_mask g.xtick text", timeout=LONG)
    found = page.evaluate(BOXES, "tvi_mask")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(".st-key-tvi_mask").screenshot(path=str(SHOTS / "causal_mask_1400.png"))
    assert len(found["ticks"]) >= 5, found["ticks"]                   # <s> and the pieces it reads
    problems = label_problems(found, "the causal mask")
    assert not problems, "\n".join(problems)
    visit.assert_offline_and_quiet()


def test_the_sidebar_icons_need_no_emoji_font(visit):
    page = open_page(visit, WIDE, "")
    idle(page)
    nav = page.locator("[data-testid='stSidebarNav']")
    assert nav.locator("a", has_text="Translate").count() >= 1
    assert nav.locator("[data-testid='stIconEmoji']").count() == 0, \
        f"an emoji icon in the sidebar: {nav.locator('[data-testid=stIconEmoji]').all_inner_texts()}"
    visit.assert_offline_and_quiet()
