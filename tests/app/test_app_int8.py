"""AppTest of the Translate page's int8 weights: the translation is the int8 copy's and says so in a
caption, the float32 model is one toggle away, the server's default comes from $EXPLORER_INT8, the URL
keeps the choice, and the shared float model is never replaced."""
from __future__ import annotations

import pytest

from explorer.config import DecodeConfig
from explorer.decoding import translate
from explorer.model import int8
from explorer.model.int8 import quantize
from explorer.store.checkpoint import load_checkpoint
from support.app_support import NUMBERS, info_for, no_exception, open_app, shown_translation

pytestmark = pytest.mark.skipif(int8.engine() is None, reason="this torch has no int8 engine")
SETTINGS = DecodeConfig(strategy="beam", beam_size=5, n_best=5)


def _caption(at) -> bool:
    return any("int8" in c.value for c in at.caption)


@pytest.fixture(autouse=True)
def _shipped():
    if not (NUMBERS / "model.safetensors").is_file():
        pytest.skip("needs the shipped checkpoints/numbers-en-de")


def test_int8_from_the_url_then_float_one_click_away(monkeypatch):
    monkeypatch.delenv("EXPLORER_INT8", raising=False)
    info, text = info_for(NUMBERS)
    at = open_app(info.name, text=text, query={"int8": "1"})
    no_exception(at)
    ckpt = load_checkpoint(info.path)
    expected = translate(quantize(ckpt.model), ckpt.tokenizer, text, SETTINGS)
    assert shown_translation(at) == expected.text.replace("\\", "") and _caption(at)
    assert at.toggle(key="dec_int8").value is True and at.query_params["int8"] == "1"
    at.toggle(key="dec_int8").set_value(False).run()
    no_exception(at)
    assert not _caption(at) and "int8" not in at.query_params                # float32: the default, left out
    assert shown_translation(at) == translate(ckpt.model, ckpt.tokenizer, text, SETTINGS).text.replace("\\", "")


def test_the_server_default_from_the_environment(monkeypatch):
    monkeypatch.setenv("EXPLORER_INT8", "1")
    info, text = info_for(NUMBERS)
    at = open_app(info.name, text=text)
    no_exception(at)
    assert at.toggle(key="dec_int8").value is True and _caption(at) and "int8" not in at.query_params
    at = open_app(info.name, text=text, query={"int8": "0"})                # a link asks for float32
    assert at.toggle(key="dec_int8").value is False and not _caption(at)
    monkeypatch.setenv("EXPLORER_INT8", "0")
    for unknown in ("2", "10000", "-1"):                                      # no switch's value: the default
        at = open_app(info.name, text=text, query={"int8": unknown})
        assert at.toggle(key="dec_int8").value is False and "int8" not in at.query_params


def test_not_offered_where_int8_cannot_run(monkeypatch):
    monkeypatch.setenv("EXPLORER_INT8", "1")
    monkeypatch.setattr(int8, "engine", lambda: None)
    info, text = info_for(NUMBERS)
    at = open_app(info.name, text=text, query={"int8": "1"})
    no_exception(at)
    assert not [t for t in at.toggle if t.key == "dec_int8"] and not _caption(at)
