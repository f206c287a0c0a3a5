"""The README's student tour, walked as written, in a real browser on the shipped checkpoints: each step
does what its words say. The words the test follows are read from README.md's tour (a test here fails
when they change, so the README and this walk change together):

1. `/` opens Translate on the Bible model's showcase verse, the translation with its one slip, marked
   Grounded; an everyday sentence typed instead is marked Guessing;
2. the Next link at the foot leads to Architecture, where clicking a block of Figure 1 selects it; Next
   again to Positional encoding;
3. Next to Attention: Cross-attention chosen, cross L3 H3 switched off under Head ablation, and the
   translation without it has lost the slip (equal to the library's translation with that head off);
4. Beam search from the sidebar: the Step slider moved one step shows the next step's ranked candidates,
   each kept or pruned;
5. Training vs inference from the sidebar: both runs drawn;
then numbers-en-de picked in the sidebar: the sentence becomes one of its own test sentences.
"""
from __future__ import annotations

import re

import pytest
from browser_support import (BIBLE, LONG, NUMBERS, ROOT, _model, app_settings, idle, no_exception, open_app, open_tab,
                             pick_checkpoint, sidebar_to, squash, timed, translation_on_screen, type_sentence,
                             url_param)
from test_presenter_browser import next_page, title

from explorer.plots.architecture import BLOCKS

README = (ROOT / "README.md").read_text(encoding="utf-8")
TOUR = README[README.index("### Student: a five-minute tour"):README.index("### Teacher")]
SLIP = "Where are you stand?"
FIXED = "Where are you?"
HEAD = ("cross", 2, 2)                        # cross L3 H3, as the README names it
EVERYDAY = "Mi hermana trabaja en un hospital."


def said(*phrases: str) -> None:
    """The tour says each of `phrases` (what the step below does)."""
    missing = [p for p in phrases if p not in squash(TOUR)]
    assert not missing, f"the README's tour no longer says {missing}: walk it again and change this test with it"


def verdict(page) -> str:
    found = page.locator(".st-key-grounding_verdict [data-testid='stAlert']")
    found.first.wait_for(timeout=LONG)
    return squash(found.first.inner_text())


def library(text: str, ablate=()) -> str:
    from explorer.decoding import translate

    ckpt = _model(BIBLE)
    return squash(translate(ckpt.model, ckpt.tokenizer, text, app_settings(), ablate=list(ablate)).text)


def paragraph(page, prefix: str) -> str:
    """The text after `prefix` in the paragraph that starts with it, once it is drawn."""
    page.wait_for_function("p => [...document.querySelectorAll('p')].some(e => e.innerText.startsWith(p))",
                           arg=prefix, timeout=LONG)
    return squash([t for t in page.locator("p").all_inner_texts() if t.startswith(prefix)][0][len(prefix):])


def step_heading(page) -> int:
    shown = page.locator("h3", has_text=re.compile(r"^Candidates ranked at step \d+")).first
    shown.wait_for(timeout=LONG)
    return int(re.search(r"step (\d+)", shown.inner_text()).group(1))


def test_the_readme_tour_does_what_it_says(visit, context):
    for name in (BIBLE, NUMBERS):
        if not (ROOT / "checkpoints" / name / "model.safetensors").is_file():
            pytest.skip(f"needs checkpoints/{name}")
    # 1. make run opens Translate on the showcase verse: its slip, and the verdict
    said("opens **Translate** on the held-out verse it translates best of the first 24, *Grounded*",
         f'with one slip ("{SLIP}")', "an everyday sentence is marked *Guessing*")
    page = open_app(visit)
    no_exception(page)
    assert title(page).startswith("Translate") and url_param(page, "ckpt") == BIBLE
    opening = url_param(page, "text")
    assert opening and SLIP in translation_on_screen(page) and verdict(page).startswith("Grounded.")
    other = open_app(type("Visit", (), {"page": context.new_page(), "url": visit.url})(), ckpt=BIBLE)
    try:
        type_sentence(other, "Sentence to translate", EVERYDAY)
        other.wait_for_function("t => new URLSearchParams(location.search).get('text') === t", arg=EVERYDAY,
                                timeout=LONG)
        idle(other)
        assert verdict(other).startswith("Guessing.")
    finally:
        other.close()

    # 2. Next at the foot: Architecture, a block clicked; Positional encoding
    said("Follow **Next** at the foot of each page. **Architecture**: click a block of the paper's Figure 1",
         "**Positional encoding**")
    next_page(page, "Architecture")
    block = page.locator(".st-key-arch_block input:checked")
    before = block.evaluate("e => e.closest('label').innerText")
    with timed("click a block of Figure 1"):
        points = page.locator(".st-key-arch_diagram .scatterlayer .point")
        points.first.wait_for(timeout=LONG)
        keys = page.evaluate("() => document.querySelector('.st-key-arch_diagram .js-plotly-plot').data[0].customdata")
        other = next(i for i, key in enumerate(keys) if BLOCKS[key][0] != before)     # a target of another block
        points.nth(other).scroll_into_view_if_needed()                  # a click below the fold reaches nothing
        box = points.nth(other).bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        # the rerun the click starts may not have begun yet: wait for the radio to move, not for idle
        page.wait_for_function("b => document.querySelector('.st-key-arch_block input:checked')"
                               "?.closest('label').innerText !== b", arg=before, timeout=LONG)
        idle(page)
        clicked = page.locator(".st-key-arch_block input:checked").evaluate("e => e.closest('label').innerText")
    assert clicked and clicked != before, f"clicking Figure 1's blocks left the block at {before!r}"
    no_exception(page)
    next_page(page, "Positional encoding")

    # 3. Attention: cross-attention, cross L3 H3 off, the slip gone
    said("**Attention**: choose *Cross-attention*", "Under *Head ablation* switch off *cross L3 H3*",
         f'the slip goes ("{FIXED}")')
    next_page(page, "Attention")
    page.locator(".st-key-attn_kind label", has_text="Cross-attention").click()
    idle(page)
    open_tab(page, page.locator("[data-testid='stMain'] [role='tab']", has_text="Head ablation"))
    picker = page.locator(".st-key-ablate_pick input")
    picker.click()
    page.keyboard.type("cross L3 H3")
    page.locator("[role='option']", has_text=re.compile(r"^cross L3 H3$")).click()
    page.keyboard.press("Escape")
    with timed("translated again without cross L3 H3"):
        without = paragraph(page, "Without those heads:")
    idle(page)
    no_exception(page)
    assert without == library(opening, [HEAD]) and FIXED in without and SLIP not in without

    # 4. Beam search from the sidebar: the Step slider
    said("**Beam search** (sidebar): move the *Step* slider: every candidate, ranked, kept or pruned")
    sidebar_to(page, "Beam search")
    first = step_heading(page)
    page.locator(".st-key-beam_step input[type='range']").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("n => [...document.querySelectorAll('h3')].some(h => h.innerText.startsWith("
                           "'Candidates ranked at step ' + n))", arg=first + 1, timeout=LONG)
    idle(page)
    label = page.locator(f"[class*='st-key-beam_row_{first}_'] input").first.input_value()     # 0-based in the key
    assert re.search(r"\((kept|pruned|finished)", label), label

    # 5. Training vs inference from the sidebar
    said("**Training vs inference**: the same sentence read in one pass against decoded word by word")
    sidebar_to(page, "Training vs inference")
    heads = squash(" ".join(page.locator("h3").all_inner_texts()))
    assert "Training: teacher forcing" in heads and "Inference: greedy, one token per step" in heads

    # then numbers-en-de: its own sentence
    said("Then pick `numbers-en-de` under *Checkpoint* in the sidebar: the sentence becomes one of its numbers")
    pick_checkpoint(page, NUMBERS)
    now = url_param(page, "text")
    from explorer.data.files import read_tsv

    assert now != opening and now in {p.src for p in read_tsv(str(ROOT / "checkpoints" / NUMBERS / "test.tsv"))}
    no_exception(page)
    visit.assert_offline_and_quiet()
