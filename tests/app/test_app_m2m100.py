"""AppTest: an imported NLLB model (a random one: pre-LN, fairseq's positions, a decoder starting with </s>,
a language pair) opens on every page that reads a model like any checkpoint: they translate with the pair
it was imported with, or the one the sidebar's pickers (or a link) choose, the target-language tag forced
as the first output token and left out of the text."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from support.app_support import ROOT, AppTest, no_exception
from support.waiting import STALL_S
from webapp import state

MODEL = "nllb-tiny"
PAGES = ("translate", "beam", "attention", "architecture", "positions", "contributions", "heads", "alignment", "layers",
         "causes", "search", "training_vs_inference", "checkpoints", "features")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    pytest.importorskip("transformers")
    from explorer.interop.hf_import import import_m2m100
    from support.m2m100_helpers import random_m2m100

    root = tmp_path_factory.mktemp("m2m100-app")
    random_m2m100(root / "hf", kind="nllb", d_model=48, heads=6, ffn=96, layers=3, seed=1)
    import_m2m100(str(root / "hf"), root / "models" / MODEL, dtype=torch.float32,
                  src_lang="spa_Latn", tgt_lang="eng_Latn")
    return root / "models"


@pytest.fixture
def app_env(models, monkeypatch):
    monkeypatch.delenv(state.ROOTS_ENV, raising=False)
    monkeypatch.setenv(state.MODELS_ENV, str(models))
    monkeypatch.setenv("EXPLORER_DEVICE", "cpu")
    state.refresh_checkpoints()
    yield models
    state.refresh_checkpoints()


@pytest.mark.parametrize("page", PAGES)
def test_every_model_page_opens_an_imported_nllb_model(app_env, page):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=STALL_S)
    at.query_params["ckpt"] = MODEL
    at.session_state["text"] = "la casa es grande"
    at.run()
    no_exception(at)
    assert Path(at.session_state["checkpoint_path"]).name == MODEL
    at.switch_page(f"webapp/pages/{page}.py").run()
    no_exception(at)
    if page == "translate":                 # the source's tag first; the output's first piece is the forced tag
        shown = " ".join(str(e.value) for kind in ("markdown", "caption", "code", "text") for e in at.get(kind))
        assert "spa_Latn \u2581la" in shown and "</s> eng_Latn" in shown


def test_the_sidebar_picks_the_language_pair_and_a_link_keeps_it(app_env):
    """The pickers start on the imported pair; another pair, from the pickers or a link, is the one the
    page translates with (the source's tag and the forced output tag change) and stays in the URL."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=STALL_S)
    at.query_params["ckpt"] = MODEL
    at.session_state["text"] = "la casa es grande"
    at.run()
    no_exception(at)
    pickers = {s.label: s for s in at.sidebar.selectbox}
    assert pickers["Source language"].value == "spa_Latn" and pickers["Target language"].value == "eng_Latn"
    pickers["Target language"].set_value("fra_Latn").run()
    no_exception(at)
    assert at.query_params["tgt_lang"] == ["fra_Latn"] or at.query_params["tgt_lang"] == "fra_Latn"
    shown = " ".join(str(e.value) for kind in ("markdown", "caption", "code", "text") for e in at.get(kind))
    assert "</s> fra_Latn" in shown

    linked = AppTest.from_file(str(ROOT / "app.py"), default_timeout=STALL_S)
    linked.query_params.update({"ckpt": MODEL, "src_lang": "deu_Latn", "tgt_lang": "ita_Latn", "text": "la casa"})
    linked.run()
    no_exception(linked)
    shown = " ".join(str(e.value) for kind in ("markdown", "caption", "code", "text") for e in linked.get(kind))
    assert "deu_Latn \u2581la" in shown and "</s> ita_Latn" in shown
    defaults = {s.label: s.options[s.proto.default] for s in linked.sidebar.selectbox}      # a browser's fallback
    assert defaults["Source language"] == "deu_Latn" and defaults["Target language"] == "ita_Latn"
