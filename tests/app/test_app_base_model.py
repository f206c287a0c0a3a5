"""AppTest of every page on models the size of the paper's base Transformer (and of OPUS-MT).

The shipped models have 4 heads and 3+3 layers; an imported Marian model has 8 heads, 6+6 layers
(48 heads of each attention kind), d_model 512 and a 58k vocabulary. Every page must run on it
without an exception or an error message, the Attention page's all-heads grids must hold all 48
heads of each kind, and switching head or beam step must keep working. Each test runs on two
checkpoints with random weights (tests/support/base_model.py): IMPORTED, a MarianMTModel imported
with explorer.convert's importer (Marian's special ids: eos 0, pad 58,100 = the decoder's start,
a VocabTokenizer), and NAME, a native one (this project's ids: pad 0, bos 2, eos 3). The pages'
job is to show whatever the model does.
"""
from __future__ import annotations

import pytest

from support.app_support import chart, no_exception, open_app, texts
from support.base_model import IMPORTED, NAME, SENTENCE, VOCAB_SIZE, base_models_dir  # noqa: F401  (a session fixture)
from webapp import lecture, state

PAGES = list(dict.fromkeys(f"{lecture.PAGES_DIR}/{entry.script}" for entry in lecture.PAGES_TABLE))
ATTENTION = "webapp/pages/attention.py"
BEAM = "webapp/pages/beam.py"
TRANSLATE = "webapp/pages/translate.py"


@pytest.fixture(autouse=True)
def only_the_base_model(base_models_dir, tmp_path, monkeypatch):  # noqa: F811
    """The app lists only the base-size checkpoint; training runs go to a temporary folder."""
    monkeypatch.setenv(state.ROOTS_ENV, str(base_models_dir))
    monkeypatch.delenv(state.MODELS_ENV, raising=False)
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path / "runs"))
    state.refresh_checkpoints()
    yield
    state.refresh_checkpoints()


@pytest.fixture(params=[IMPORTED, NAME])
def model(request) -> str:
    """The checkpoint a test runs on, by the name the picker knows it by."""
    return request.param


def clean(at) -> None:
    """No exception, and no error message: a page that runs but says it failed does not count."""
    no_exception(at)
    assert not at.error, texts(at.error)


def test_the_pages_list_is_read_from_the_app():
    assert {ATTENTION, BEAM, TRANSLATE} <= set(PAGES) and len(PAGES) >= 7, PAGES


@pytest.mark.parametrize("page", PAGES, ids=[p.rsplit("/", 1)[-1][:-3] for p in PAGES])
def test_every_page_runs_on_a_base_size_model(page, model):
    at = open_app(model, page, text=SENTENCE)
    clean(at)
    assert at.session_state["checkpoint_path"].endswith(model)
    card = texts(next(e for e in at.sidebar.expander if e.label == "Model card").caption)
    assert "the paper's base model" in card.replace("\\", ""), card


def test_the_all_heads_grid_holds_48_heads_of_each_kind(model):
    at = open_app(model, ATTENTION, text=SENTENCE)
    clean(at)
    for kind in ("encoder", "decoder", "cross"):
        at.radio(key="attn_kind").set_value(kind).run()
        clean(at)
        grid = chart(at, "attn_grid")
        assert len([t for t in grid["data"] if t["type"] == "heatmap"]) == 6 * 8, kind
        titles = {a["text"] for a in grid["layout"]["annotations"]}
        assert {"L1 H1", "L6 H8"} <= titles
    at.radio(key="attn_head").set_value(8).run()
    at.radio(key="attn_layer").set_value(6).run()
    clean(at)
    assert "Layer 6, head 8" in chart(at, "attn_zoom")["layout"]["title"]["text"]


@pytest.mark.parametrize("tab", ["Head summary", "Word alignment", "Output vs reference", "bertviz"])
def test_every_attention_tab_runs_at_48_heads(tab, model):
    at = open_app(model, ATTENTION, text=SENTENCE)
    at.session_state["view"] = tab
    at.run()
    clean(at)
    if tab == "bertviz":
        at.toggle(key="bertviz_on").set_value(True).run()
        clean(at)
        assert not at.warning, texts(at.warning)                       # not refused as too large
        frames = at.get("iframe") or at.get("components_html") or at.get("html")
        assert len(list(frames)) == 2


def test_ablating_heads_at_48_heads(model):
    at = open_app(model, ATTENTION, text=SENTENCE)
    at.session_state["view"] = "Head ablation"
    at.run()
    at.multiselect(key="ablate_pick").set_value([("cross", 5, 7), ("encoder", 0, 0)]).run()
    clean(at)
    assert chart(at, "ablation_diff")


def test_stepping_the_beam_on_a_base_size_model(model):
    at = open_app(model, BEAM, text=SENTENCE)
    clean(at)
    assert chart(at, "beam_tree")["data"]
    steps = at.slider(key="beam_step")
    for step in (2, int(steps.max), 1):
        at.slider(key="beam_step").set_value(step).run()
        clean(at)
        assert f"Candidates ranked at step {step}" in texts(at.subheader)
        assert chart(at, "beam_attn_step")["data"]


def test_the_pages_use_the_models_own_special_ids(model, base_models_dir):  # noqa: F811
    """Sources end with the model's EOS, outputs never hold its pad, the decoder starts with its start
    id: Marian's (eos 0, pad = start = the last id) for IMPORTED, this project's for NAME."""
    from html import unescape

    from explorer.store.checkpoint import read_config
    from explorer.text import load_tokenizer

    cfg = read_config(base_models_dir / model)[1]
    tokenizer = load_tokenizer(base_models_dir / model)
    if model == IMPORTED:
        assert (cfg.eos_id, cfg.pad_id, cfg.decoder_start_id) == (0, VOCAB_SIZE - 1, VOCAB_SIZE - 1)
    piece = lambda i: tokenizer.id_to_piece(i, side="tgt")  # noqa: E731
    at = open_app(model, TRANSLATE, text=SENTENCE)
    clean(at)
    source, output = (c.value.split() for c in at.code[:2])
    assert source[-1] == tokenizer.id_to_piece(cfg.eos_id, side="src") and output
    assert piece(cfg.pad_id) not in output and piece(cfg.decoder_start_id) not in output
    at = open_app(model, ATTENTION, text=SENTENCE)
    at.radio(key="attn_kind").set_value("decoder").run()
    clean(at)
    keys = [unescape(t) for t in chart(at, "attn_zoom")["layout"]["xaxis"]["ticktext"]]
    assert keys[0] == piece(cfg.decoder_start_id) and piece(cfg.decoder_start_id) not in keys[1:]


def test_the_train_page_proposes_the_fixed_peak_for_an_imported_model():
    """An imported model records no step or rate: the form proposes the recipe's fixed peak, says why,
    and warns above the ceiling (explorer.training.schedule.fine_tune_schedule)."""
    from explorer.training.schedule import UNRECORDED_CEILING, fine_tune_schedule, noam_rate

    at = open_app(IMPORTED, "webapp/pages/train.py")
    at.radio(key="tr_numbers_from").set_value("checkpoint").run()
    healthy = [i for i in state.available_checkpoints() if not i.error]
    pick = next(n for n, i in enumerate(healthy) if i.path.name == IMPORTED)
    at.selectbox(key="tr_numbers_init").set_value(pick).run()
    clean(at)
    info = healthy[pick]
    recipe = fine_tune_schedule(info.meta["training"], info.meta["model"]["d_model"])
    assert recipe.ended_at is None
    warmup, lr = at.number_input(key=f"tr_numbers_warmup_ft{pick}"), at.number_input(key=f"tr_numbers_lr_ft{pick}")
    assert warmup.value == recipe.warmup and lr.value == pytest.approx(recipe.lr_factor, abs=1e-4)
    assert "does not record how its training ended" in texts(at.caption) and not at.warning
    d_model = info.meta["model"]["d_model"]
    high = round(2 * UNRECORDED_CEILING * d_model ** 0.5 * recipe.warmup ** 0.5, 4)      # a peak 2x the ceiling
    assert noam_rate(recipe.warmup, d_model, high, recipe.warmup) > UNRECORDED_CEILING
    at.number_input(key=f"tr_numbers_lr_ft{pick}").set_value(high).run()
    assert "may undo what the model learned" in texts(at.warning)
