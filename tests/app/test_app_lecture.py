"""AppTests of the lecture order and presenter mode: every page ends with the "Next" link of the
paper's order (kept in webapp.lecture), also when it stops early; the link keeps the checkpoint, the
sentence and presenter mode; presenter mode, from the URL, folds the Learn panels (the result comes
first), enlarges the type and hides advanced controls; hostile URL values give no traceback.

Checkpoint: checkpoints/numbers-en-de when it is usable (the fastest), else the one the other page
tests use (support.app_support); the tests skip, saying so, when there is none.
"""
from __future__ import annotations

from urllib.parse import parse_qs

import pytest

from support.app_support import ROOT, checkpoint, default_roots, no_exception, open_app  # noqa: F401
from explorer.store.catalog import list_checkpoints

pytestmark = pytest.mark.usefixtures("default_roots")

# The order the lecture follows, written out here independently of webapp.lecture: (page, next title).
LECTURE = [
    ("translate", "Architecture"),
    ("architecture", "Positional encoding"),
    ("positions", "Attention"),
    ("attention", "Layers"),
    ("layers", "Causes"),
    ("causes", "Features"),
    ("features", "Graphs"),
    ("graphs", "Heads"),
    ("heads", "Contributions"),
    ("contributions", "Alignment"),
    ("alignment", "Search"),
    ("search", "Beam search"),
    ("beam", "Training vs inference"),
    ("training_vs_inference", "Schedule"),
    ("schedule", "Train"),
    ("train", "Checkpoints"),
]
URL_PATHS = {"Architecture": "architecture", "Positional encoding": "positions", "Attention": "attention",
             "Layers": "layers", "Causes": "causes", "Features": "features", "Graphs": "graphs",
             "Heads": "heads", "Contributions": "contributions", "Alignment": "alignment", "Search": "search", "Beam search": "beam", "Training vs inference": "training_vs_inference",
             "Schedule": "schedule",
             "Train": "train", "Checkpoints": "checkpoints"}
NUMBER_TEXT = "three hundred and twenty one"


def script(page: str) -> str:
    return f"webapp/pages/{page}.py"


@pytest.fixture(scope="module")
def model(checkpoint):
    """(checkpoint name, a sentence in its language): numbers-en-de when usable, else `checkpoint`'s."""
    numbers = ROOT / "checkpoints" / "numbers-en-de"
    info = next((i for i in list_checkpoints(numbers.parent) if i.path == numbers), None) if numbers.is_dir() else None
    if info is not None and not info.error:
        return info.name, NUMBER_TEXT
    return checkpoint[0].name, checkpoint[1]


@pytest.fixture
def no_runs(tmp_path, monkeypatch):
    """An empty runs directory: the Train page stops early ("No runs yet"), the Schedule page has no run."""
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path / "runs"))


def footer_links(at) -> list:
    """The page links of the footer: the last block of the main area, below the page's own."""
    return [e for e in _walk(at.main.children[len(at.main.children) - 1]) if getattr(e, "type", None) == "page_link"]


def _walk(node):
    for child in getattr(node, "children", {}).values():
        yield child
        yield from _walk(child)


def the_next_link(at):
    links = footer_links(at)
    assert len(links) == 1, f"expected one link under the page, found {[l.proto.label for l in links]}"
    return links[0].proto


def query(link) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(link.query_string, keep_blank_values=True).items()}


@pytest.mark.parametrize("page,next_title", LECTURE, ids=[p for p, _ in LECTURE])
def test_every_page_ends_with_the_next_page_of_the_lecture(model, no_runs, page, next_title):
    name, text = model
    at = open_app(name, script(page), text)
    no_exception(at)
    link = the_next_link(at)
    assert link.label.startswith(f"**Next: {next_title}** — "), link.label
    assert len(link.label.split(" — ", 1)[1]) > 10                  # the one-line reason
    assert link.page == URL_PATHS[next_title]
    q = query(link)
    assert q.get("ckpt") == name and q.get("text") == text           # the model and the sentence go along
    assert "present" not in q


def test_the_landing_page_starts_the_lecture(model):
    """The app's default page (served at "/", opened with no page named) points at Architecture."""
    name, text = model
    at = open_app(name, None, text)
    no_exception(at)
    assert at.title[0].value == "Translate"
    link = the_next_link(at)
    assert link.label.startswith("**Next: Architecture** — ") and link.page == "architecture"


def test_the_last_page_leads_back_to_the_start(model, no_runs):
    name, text = model
    at = open_app(name, script("checkpoints"), text)
    no_exception(at)
    link = the_next_link(at)
    assert "Next:" not in link.label and link.label.startswith("End of the lecture. Back to the start: Translate")
    assert link.page == "translate"                                 # the landing page, where the lecture starts


def test_the_order_visits_every_page_once(model):
    """The lecture, followed link by link from the landing page, meets every page once and ends."""
    from webapp import lecture

    seen, page = [], lecture.START
    while (step := lecture.next_step(page)) is not None:
        page = step[0]
        assert page not in seen, f"{page} twice"
        seen.append(page)
    assert seen == [URL_PATHS[t] for _, t in LECTURE]
    assert lecture.next_step("no-such-page") is None


def test_the_sidebar_lists_the_pages_in_the_lecture_order():
    """One page table: the sidebar's sections list the pages in the lecture's order, every one of them
    (the README's and the teaching guide's lists are held to it by tests/unit/test_docs_links.py)."""
    from webapp import lecture

    # st.navigation groups pages by section in first-seen order: each section's pages must be contiguous
    # in the table, or grouping would reorder them (st.Page itself needs a running app to be read)
    runs = [e.section for i, e in enumerate(lecture.PAGES_TABLE) if i == 0 or lecture.PAGES_TABLE[i - 1].section != e.section]
    assert len(runs) == len(set(runs)), runs
    app = (ROOT / "app.py").read_text()
    assert "lecture.navigation_pages()" in app
    assert "st.navigation(PAGES, expanded=True)" in app          # past twelve pages it would hide some
    assert [p for p, _ in lecture.ORDER] == [e.url_path for e in lecture.PAGES_TABLE[1:]]


@pytest.mark.parametrize("page,why", [("translate", "no sentence"), ("train", "no training run")])
def test_a_page_that_stops_early_still_ends_with_its_link(model, no_runs, page, why):
    name, _ = model
    at = open_app(name, script(page), "   " if page == "translate" else None)
    no_exception(at)
    assert at.info, f"the {page} page did not stop early ({why})"
    assert the_next_link(at).page == dict((p, URL_PATHS[t]) for p, t in LECTURE)[page]


def test_the_link_keeps_the_decoding_settings_but_not_the_pages_own_view(model):
    name, text = model
    at = open_app(name, script("attention"), text, query={"dec": "greedy", "layer": "1", "kind": "enc"})
    no_exception(at)
    q = query(the_next_link(at))
    assert q.get("dec") == "greedy" and q.get("ckpt") == name
    assert "layer" not in q and "kind" not in q                      # the Attention page's own view stays behind


def test_the_translate_pages_first_sentence_is_carried(model):
    """A fresh visit's first sentence is chosen by the page itself; the link under it still carries it."""
    name, _ = model
    at = open_app(name)                                             # the landing page, a fresh visit
    no_exception(at)
    shown = at.session_state["text"]
    assert shown and query(the_next_link(at)).get("text") == shown


# ---- presenter mode --------------------------------------------------------------------------------
def downloads(at) -> list[str]:
    return [b.proto.label for b in at.get("download_button")]


def learn_panels(at) -> list:
    return [e for e in at.expander if e.label.startswith("Learn")]


def styles(at) -> str:
    return " ".join(h.proto.body for h in at.get("html"))


def test_presenter_mode_from_the_url(model):
    name, text = model
    normal = open_app(name, script("positions"), text)
    present = open_app(name, script("positions"), text, query={"present": "1"})
    for at in (normal, present):
        no_exception(at)
    assert downloads(normal), "the page shows no download button to hide"
    assert downloads(present) == []                                  # hidden in presenter mode
    assert present.toggle(key="presenter").value is True and normal.toggle(key="presenter").value is False
    assert "font-size" in styles(present) and "font-size" not in styles(normal)
    assert learn_panels(present) and not any(e.proto.expanded for e in learn_panels(present))
    assert all(e.proto.expanded for e in learn_panels(normal))                 # a student's: open
    assert query(the_next_link(present)).get("present") == "1"      # carried into the next page's link
    assert "present" not in normal.query_params and "present" in present.query_params


def test_presenter_mode_hides_the_translate_pages_token_ids(model):
    name, text = model
    normal = open_app(name, script("translate"), text)
    present = open_app(name, script("translate"), text, query={"present": "yes"})
    labels = lambda at: [e.label for e in at.expander]                               # noqa: E731
    assert "Token ids (piece, id)" in labels(normal)
    assert "Token ids (piece, id)" not in labels(present)
    assert downloads(normal) and not downloads(present)
    assert learn_panels(present) and not any(e.proto.expanded for e in learn_panels(present))
    no_exception(present)


def test_presenter_mode_hides_the_beam_pages_length_penalty(model):
    name, text = model
    normal = open_app(name, script("beam"), text)
    present = open_app(name, script("beam"), text, query={"present": "1"})
    for at in (normal, present):
        no_exception(at)
    keys = lambda at: {w.key for w in list(at.selectbox) + list(at.slider)}          # noqa: E731
    assert {"beam_lp", "beam_alpha"} <= keys(normal)
    assert not {"beam_lp", "beam_alpha"} & keys(present)
    assert "beam_size" in keys(present)                                             # the beam size stays
    assert len(present.dataframe[0].value) == len(normal.dataframe[0].value)        # the same search


def test_presenter_mode_hides_the_architecture_pages_raw_vectors(model):
    name, text = model
    normal = open_app(name, script("architecture"), text, query={"block": "enc_attn"})
    present = open_app(name, script("architecture"), text, query={"block": "enc_attn", "present": "1"})
    for at in (normal, present):
        no_exception(at)
    raw = lambda at: [d for d in at.dataframe                                        # noqa: E731
                      if str(d.value.index[0]).split(":")[0] in ("q", "k 1", "v 1")]
    qkv = lambda at: [e for e in at.expander if e.label.startswith("Q, K and V of head")]   # noqa: E731
    assert len(raw(normal)) == 3 and len(qkv(normal)) == 1
    assert raw(present) == [] and qkv(present) == []
    assert len(present.dataframe) == len(normal.dataframe) - 3                      # the other tables stay


def test_turning_presenter_mode_off_brings_the_controls_back(model):
    name, text = model
    at = open_app(name, script("positions"), text, query={"present": "1"})
    assert not downloads(at)
    at.toggle(key="presenter").set_value(False).run()
    no_exception(at)
    assert downloads(at) and "present" not in at.query_params
    assert "present" not in query(the_next_link(at))
    at.toggle(key="presenter").set_value(True).run()
    assert not downloads(at) and query(the_next_link(at)).get("present") == "1"


@pytest.mark.parametrize("value", ["0", "", "<script>alert(1)</script>", "1" * 5000, "\x00", "on\n", "true;drop"])
def test_hostile_presenter_values_are_off_or_on_never_an_error(model, value):
    name, text = model
    at = open_app(name, script("positions"), text, query={"present": value})
    no_exception(at)
    expected = value.strip().lower() in {"1", "true", "yes", "on"}
    assert at.toggle(key="presenter").value is expected
    assert bool(downloads(at)) is not expected
