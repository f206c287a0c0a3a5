"""The lecture order: which page follows which, and why, in the order of "Attention Is All You Need".

Why one place: a teacher walks a 50-minute lecture through the pages in the paper's order (the
model, its positions, attention, decoding, training), and each page ends with a "Next" link to the
following one with a one-line reason. The pages, their order, sections and reasons live here only
(PAGES_TABLE): app.py builds the sidebar from it and draws the link under every page (run()), so
pages carry no navigation code.

The link is drawn before the page runs and drawn again after it: a page that ends early with
st.stop() (no sentence, no training run yet) still ends with it, and one that finishes links with
what it chose (the Translate page picks the first sentence of a fresh visit). It keeps the URL
state that belongs to no single page (CARRIED: checkpoint, sentence, decoding settings, presenter
mode), so the next page, also opened in a new tab, shows the same model, sentence and translation.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Sequence

import streamlit as st

from webapp import decode_url, url_keys

@dataclass(frozen=True)
class PageEntry:
    url_path: str
    script: str                # under webapp/pages/
    title: str
    section: str               # the sidebar's heading above it
    why: str                   # why it comes next in the lecture, one line ("" for the landing page)
    # None, or a Material icon (":material/<name>:", Streamlit's own font), never an emoji: an emoji needs an
    # emoji font, and on a machine without one the sidebar showed an empty box
    icon: str | None = None


# Every page, once: the sidebar (st.navigation, grouped by section), the lecture's Next links and the
# tests read this table, so the sidebar's order is the lecture's. The landing page comes first; the
# lecture then follows the paper: the model, its positions, attention, inside the model (what each layer
# knows, what causes an output), what heads do over a test set, decoding, training. A new page goes where
# the lecture needs it, in a section that already says what kind of question it answers.
PAGES_TABLE = (
    PageEntry("translate", "translate.py", "Translate", "Start", ""),
    PageEntry("architecture", "architecture.py", "Architecture", "The model",
              "the whole model at a glance, the paper's Figure 1 with this sentence's numbers"),
    PageEntry("positions", "positions.py", "Positional encoding", "The model",
              "attention alone ignores word order, so positions are added to the embeddings first"),
    PageEntry("attention", "attention.py", "Attention", "The model",
              "the paper's core: what each head of each layer looks at"),
    PageEntry("layers", "layers.py", "Layers", "Inside the model",
              "what each layer has worked out: a translation per encoder layer, a guess per decoder layer"),
    PageEntry("causes", "causes.py", "Causes", "Inside the model",
              "seeing is not causing: change one word and patch activations back to find what carries it"),
    PageEntry("features", "features.py", "Features", "Inside the model",
              "what a layer's numbers mean: sparse features learned from the training pairs, and steering them"),
    PageEntry("graphs", "graphs.py", "Graphs", "Inside the model",
              "how one output word was made: the features and routes through cross-attention behind its logit"),
    PageEntry("heads", "heads.py", "Heads", "Measure",
              "over a whole test set: which heads have a job, and how many the model can lose"),
    PageEntry("contributions", "contributions.py", "Contributions", "Measure",
              "is an attention map an explanation? where each output word comes from: the source or its own prefix"),
    PageEntry("alignment", "alignment.py", "Alignment", "Measure",
              "is cross-attention a word alignment? measured against gold links, beside gradient attributions"),
    PageEntry("search", "search.py", "Search", "Measure",
              "is a wider beam better? the beam-size curve over a test set, and the search errors behind it"),
    PageEntry("beam", "beam.py", "Beam search", "Decoding",
              "how the decoder's scores for each next piece become a whole translation"),
    PageEntry("training_vs_inference", "training_vs_inference.py", "Training vs inference", "Decoding",
              "training reads the reference in one pass; decoding reads its own output"),
    PageEntry("schedule", "schedule.py", "Schedule", "Training",
              "how the paper trains: learning-rate warm-up and decay, label smoothing"),
    PageEntry("train", "train.py", "Train", "Training", "train a small model yourself and watch it learn"),
    PageEntry("checkpoints", "checkpoints.py", "Checkpoints", "Training",
              "compare what the model knew early and late in its training"),
)
START = PAGES_TABLE[0].url_path          # the landing page: it points at the lecture's first page
ORDER = tuple((p.url_path, p.why) for p in PAGES_TABLE[1:])      # (url_path, why it comes next)
PAGES_DIR = "webapp/pages"


def navigation_pages() -> dict[str, list]:
    """The st.Page objects by section, in the table's order.

    Streamlit serves its default page at "/" only (its url_path reads ""), so /translate would say
    "Page not found": a hidden second entry for the landing script answers /translate. The default
    one reserves "home" (a url_path must be unique), which therefore opens the landing page too."""
    sections: dict[str, list] = {}
    for entry in PAGES_TABLE:
        script = f"{PAGES_DIR}/{entry.script}"
        pages = sections.setdefault(entry.section, [])
        if entry.url_path == START:
            pages.append(st.Page(script, title=entry.title, icon=entry.icon, url_path="home", default=True))
            pages.append(st.Page(script, title=entry.title, icon=entry.icon, url_path=entry.url_path,
                                 visibility="hidden"))
        else:
            pages.append(st.Page(script, title=entry.title, icon=entry.icon, url_path=entry.url_path))
    return sections


SHARED = (url_keys.CKPT, url_keys.TEXT, url_keys.PRESENT, url_keys.SRC_LANG, url_keys.TGT_LANG) \
    + decode_url.SETTINGS                                                     # URL state shared by every page
CARRIED = tuple(spec.key for spec in SHARED)
RESTART = "translate another sentence, or the same one with other settings, and walk the pages again"
URL_TEXT = 1000                # the sentence carried is cut here, like the URL's (sentence.URL_CHARS)


def next_step(url_path: str) -> tuple[str, str] | None:
    """(url_path, why) of the page after `url_path` in the lecture; None after the last one or for a
    page outside the order. "" is the default page's url_path (the landing page, served at "/")."""
    paths = [p for p, _ in ORDER]
    if url_path in ("", START):
        return ORDER[0]
    if url_path in paths and paths.index(url_path) + 1 < len(ORDER):
        return ORDER[paths.index(url_path) + 1]
    return None


def carried_query() -> dict[str, str]:
    """The shared URL state the link keeps, as it stands now."""
    out: dict[str, str] = {}
    shown = url_keys.texts(SHARED)
    for key in CARRIED:
        value = shown.get(key)
        if key == url_keys.TEXT.key and isinstance(st.session_state.get("text"), str):
            value = st.session_state["text"] or None             # the sentence shown, once a page chose it
        if isinstance(value, str) and value:
            out[key] = value[:URL_TEXT]
    return out


# A page link is one line cut at the page's width; the lecture's sentence wraps instead (on a laptop,
# or in presenter mode's large type, "why" would otherwise stop mid-word).
WRAP_CSS = ("<style>.st-key-lecture_footer a span, .st-key-lecture_footer a div, .st-key-lecture_footer a p "
            "{ white-space: normal; }</style>")


def footer(current, pages: Sequence) -> None:
    """The "Next: <page> — <why>" link under page `current` (an st.Page of `pages`)."""
    by_path = {p.url_path: p for p in pages}
    step = next_step(current.url_path)
    st.divider()
    st.html(WRAP_CSS)                      # style only: takes no space
    if step is None:
        if current.url_path == ORDER[-1][0] and START in by_path:
            st.page_link(by_path[START], icon=":material/replay:", query_params=carried_query(),
                         label=f"End of the lecture. Back to the start: {by_path[START].title} — {RESTART}")
        return
    target, why = step
    if target in by_path:
        st.page_link(by_path[target], label=f"**Next: {by_path[target].title}** — {why}",
                     icon=":material/arrow_forward:", query_params=carried_query())


def tidy_url(url_path: str) -> None:
    """The URL as page `url_path` reads it, before it runs: keys it does not read and the lecture does not
    carry are dropped (webapp.url_keys), and the decoding settings a link named are written back as they
    are used (clamped: beam=100000 is the largest beam offered)."""
    url_keys.page_opened(url_path)
    url_keys.drop_unknown(url_path, CARRIED)
    if url_keys.texts(decode_url.SETTINGS):
        from webapp import state                     # state reads the URL's settings on a fresh session

        cfg = state.decode_settings()
        samples = st.session_state.get("dec_samples", st.session_state.get("_dec_samples_url"))
        url_keys.put(**decode_url.to_query(cfg, samples if isinstance(samples, int) else decode_url.DEFAULT_SAMPLES))


# A page opened from another keeps the scroll position the other was left at (Streamlit reuses the main
# area): a Next link, clicked at the foot of a long page, opened the next one scrolled past its title and
# its first result, on a projector too. This scrolls the main area to the top when the page's path changed
# since the last run, and on no other run (a rerun after a slider far down the page stays where it is).
# The page's path is in the element, so the element is new and its script runs on every page change.
TO_TOP = """<script data-page="{page}">
(() => {{
  const path = window.location.pathname, main = document.querySelector('[data-testid="stMain"]');
  if (window.__explorerPath !== undefined && window.__explorerPath !== path && main) main.scrollTo(0, 0);
  window.__explorerPath = path;
}})();
</script>"""


def run(current, pages: Sequence) -> None:
    """Run page `current` with the lecture's Next link under it (see the module docstring)."""
    tidy_url(current.url_path)
    with st.sidebar:                       # there it takes no room in the page's layout
        st.html(TO_TOP.format(page=html.escape(current.url_path or "start", quote=True)),
                unsafe_allow_javascript=True)
    body, foot = st.container(), st.container(key="lecture_footer")
    slot = foot.empty()
    with slot.container():
        footer(current, pages)
    with body:
        current.run()
    with slot.container():
        footer(current, pages)
