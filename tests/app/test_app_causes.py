"""AppTests of the Causes page (activation patching on a minimal pair), on the shipped numbers-en-de
(2 + 2 layers x 4 heads: a grid takes a fraction of a second): the page offers swaps from the model's
vocabulary and patches only on the button; the grids draw, and stay on later runs of the session; the
picked cell's patched run translates; pairs the library refuses (different lengths, identical
sources, translations that agree) and hostile text get messages, never a traceback; URL values are
clamped or fall back and are written back.
"""
from __future__ import annotations

import numpy as np
import pytest

from support.app_support import ROOT, array, chart, default_roots, has_chart, no_exception, open_app, texts  # noqa: F401

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
PAGE = "webapp/pages/causes.py"
TEXT = "three hundred and twenty one"
MARKDOWN = ("markdown", "caption", "info", "warning", "error", "success", "subheader")
GRIDS = ("causes_encoder", "causes_decoder", "causes_heads", "causes_changed")

pytestmark = [pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs checkpoints/numbers-en-de"),
              pytest.mark.usefixtures("default_roots")]


@pytest.fixture(autouse=True)
def no_grids_kept():
    """Each test starts, and leaves, with no pair's grids in the shared cache (a page shows cached grids
    without a press, so a test's grids would take another test's button away)."""
    from webapp import analyses
    analyses.patching_grids.clear()
    yield
    analyses.patching_grids.clear()


def open_causes(text=TEXT, **query):
    return open_app("numbers-en-de", PAGE, text, query=query)


def shown(at) -> str:
    return " ".join(str(e.value) for kind in MARKDOWN for e in at.get(kind))


def errors(at) -> str:
    return " ".join(e.value for e in at.error)


def test_the_page_offers_swaps_and_patches_only_on_the_button():
    at = open_causes()
    no_exception(at)
    assert at.title[0].value == "Causes"
    swaps = at.selectbox(key="causes_swap")
    assert len(swaps.options) >= 2 and swaps.value == 1
    assert "three hundred and twenty" in shown(at) or "▁three" in shown(at)
    assert "runs of the model" in shown(at)                              # the cost, before anything runs
    assert not any(has_chart(at, key) for key in GRIDS)
    q = dict(at.query_params)
    assert (q["pair"], q["swap"], q["dir"]) == ("swap", "1", "denoise")


def test_the_grids_draw_on_the_button_and_stay_for_the_session():
    at = open_causes(pair="own", corrupt="three hundred and twenty two")
    no_exception(at)
    at.button(key="causes_start").click().run()
    no_exception(at)
    assert all(has_chart(at, key) for key in GRIDS)
    enc = array(next(t for t in chart(at, "causes_encoder")["data"] if t["type"] == "heatmap")["z"])
    assert enc.shape == (3, 6)                                           # embeddings + 2 layers x 6 source pieces
    assert enc[:, 4] == pytest.approx(np.ones(3), abs=0.01)              # the changed word carries it all
    assert np.abs(enc[:, [0, 1, 2, 3]]).max() < 0.01                      # the unchanged words nothing
    assert len([t for t in chart(at, "causes_heads")["data"] if t["type"] == "heatmap"]) == 3
    # the default cell: the last encoder layer at the changed word; its run translates as the clean source
    assert "translates as:** drei hundert ein und zwanzig" in shown(at)
    assert "runs of the model" not in shown(at)                          # the offer is gone
    q = dict(at.query_params)
    assert (q["grid"], q["row"], q["col"]) == ("encoder_resid", "3", "5")
    assert "Download the grids (JSON)" in [b.proto.label for b in at.get("download_button")]
    at.selectbox(key="causes_grid").set_value("cross_heads").run()       # another cell: no button press again
    no_exception(at)
    assert all(has_chart(at, key) for key in GRIDS)
    assert at.query_params["grid"] == "cross_heads" and at.query_params["row"] == "2"
    at.radio(key="causes_dir").set_value("noise").run()
    no_exception(at)
    assert "destroyed" in chart(at, "causes_encoder")["layout"]["title"]["text"]
    assert "The clean run with it patched translates as" in shown(at)


@pytest.mark.parametrize("corrupt,message", [
    ("three hundred and twenty", "same number of pieces"),               # a different length
    (TEXT, "same pieces"),                                               # identical
    ("three hundred and twenty one ", "same pieces"),                    # identical once read
    ("three hundred one twenty one", "translate to the same output"),    # "and" -> "one": the same German
])
def test_pairs_the_library_refuses_get_its_message(corrupt, message):
    at = open_causes(pair="own", corrupt=corrupt)
    no_exception(at)
    warned = texts(at.warning)                          # a user's ordinary slip: a warning, not a red error
    assert "make no minimal pair" in warned and message in warned and not errors(at), warned
    assert "causes_start" not in [b.key for b in at.button]


def test_hostile_text_gets_messages_not_tracebacks():
    evil = "<script>alert(1)</script> ![i](http://127.0.0.1:8899/p.png) :red[r] $x$"
    at = open_causes(evil, pair="own", corrupt=evil + " **b**")
    no_exception(at)
    text = shown(at)
    assert "<script>" not in text and "](http" not in text and ":red[" not in text
    assert at.error or at.info or at.warning
    swapped = open_causes(evil)                                          # no usable swap: says so
    no_exception(swapped)
    assert "<script>" not in shown(swapped)
    assert at.text_input(key="causes_corrupt").value == evil + " **b**"  # plain text, shown as typed


def test_url_values_are_clamped_or_fall_back_and_are_written_back():
    at = open_causes(pair="bogus", swap="999", dir="sideways", grid="<b>", row="-5", col="99", zzz="1")
    no_exception(at)
    q = dict(at.query_params)
    n_swaps = len(at.selectbox(key="causes_swap").options)
    assert (q["pair"], q["swap"], q["dir"]) == ("swap", str(n_swaps), "denoise")   # swap=999: the last one
    assert "zzz" not in q and "corrupt" not in q
    assert not {"grid", "row", "col"} & set(q)                            # no cell drawn before the grids
    long = open_causes(pair="own", corrupt="x" * 5000)
    no_exception(long)
    assert len(long.query_params["corrupt"]) == 1000                      # cut like the sentence


def test_an_absurd_cell_in_the_url_is_clamped_once_the_grids_are_shown():
    at = open_causes(pair="own", corrupt="three hundred and twenty two", grid="decoder_resid", row="-5", col="99")
    at.button(key="causes_start").click().run()
    no_exception(at)
    q = dict(at.query_params)
    assert (q["grid"], q["row"], q["col"]) == ("decoder_resid", "1", "3")  # 2 layers x 3 target positions
    bad = open_causes(pair="own", corrupt="three hundred and twenty two", grid="nonsense")
    no_exception(bad)                                                     # the grids are held: shown at once
    assert "causes_start" not in [b.key for b in bad.button]
    assert bad.query_params["grid"] == "encoder_resid"


def test_presenter_mode_draws_the_page():
    at = open_causes(present="1", pair="own", corrupt="three hundred and twenty two")
    no_exception(at)
    at.button(key="causes_start").click().run()
    no_exception(at)
    assert all(has_chart(at, key) for key in GRIDS)
    assert not any(e.proto.expanded for e in at.expander if e.label.startswith("Learn"))
    assert not at.get("download_button")                                # advanced: hidden on a projector


def test_before_the_grids_the_links_cell_waits_out_of_the_url():
    """No cell is drawn before the grids: grid, row and col leave the URL (checked and kept in the session),
    and the press shows the link's cell."""
    at = open_causes(pair="own", corrupt="three hundred and twenty two", grid="decoder_resid", row="2", col="3")
    no_exception(at)
    assert not {"grid", "row", "col"} & set(at.query_params)
    at.button(key="causes_start").click().run()
    no_exception(at)
    q = dict(at.query_params)
    assert (q["grid"], q["row"], q["col"]) == ("decoder_resid", "2", "3")
    assert at.selectbox(key="causes_grid").value == "decoder_resid"


def test_a_link_to_grids_the_server_holds_opens_them_without_a_press():
    """A shared link opened while the app still holds the pair's grids (another session computed them)
    shows them and the link's cell at once; the same link to grids no one computed offers the press."""
    at = open_causes(pair="own", corrupt="three hundred and twenty two")
    at.button(key="causes_start").click().run()
    at.selectbox(key="causes_grid").set_value("cross_heads").run()
    at.radio(key="causes_dir").set_value("noise").run()
    no_exception(at)
    link = {k: at.query_params[k] for k in at.query_params if k not in ("ckpt", "text")}
    again = open_causes(**link)                                             # a fresh session
    no_exception(again)
    assert "causes_start" not in [b.key for b in again.button]
    assert all(has_chart(again, key) for key in GRIDS)
    assert again.selectbox(key="causes_grid").value == "cross_heads" and again.radio(key="causes_dir").value == "noise"
    assert {k: again.query_params[k] for k in link} == link
    from webapp import analyses
    analyses.patching_grids.clear()                                         # the server forgot them
    cold = open_causes(**link)
    no_exception(cold)
    assert "causes_start" in [b.key for b in cold.button] and not has_chart(cold, "causes_encoder")
