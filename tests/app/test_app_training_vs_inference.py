"""AppTest of the Training vs inference page on the shipped checkpoints: both views are drawn, the
model's own output gives the same numbers teacher-forced and step by step (the library's, within
1e-5), a test sentence forces its reference and says where the model's own picks differ, and odd or
empty input gives messages, never a traceback."""
from __future__ import annotations

import numpy as np
import pytest

from support.app_support import array, chart, checkpoint_params, info_for, no_exception, open_app, texts
from explorer.config import DecodeConfig
from explorer.decoding.side_by_side import side_by_side
from explorer.store.checkpoint import load_checkpoint
from support.numerics import model_atol
from webapp import sentence, state

PAGE = "webapp/pages/training_vs_inference.py"
pytestmark = pytest.mark.parametrize("ckpt_path", checkpoint_params())


def test_free_text_forces_the_own_output_and_the_numbers_agree(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, PAGE, text=text)
    no_exception(at)
    assert [r.value for r in at.radio if r.key == "tvi_forced"] in ([], ["own"])
    assert "Same inputs, same numbers" in texts(at.success)
    forced = array(chart(at, "tvi_forced_rows")["data"][1]["z"])[0]       # probabilities, row "scored token"
    steps = array(chart(at, "tvi_steps_rows")["data"][1]["z"])[0]
    ckpt = load_checkpoint(info.path)
    expected = side_by_side(ckpt.model, ckpt.tokenizer, text, cfg=DecodeConfig(**state.decode_settings()))
    # the two paths (and the page's run against this one) add in other orders: within model_atol
    atol = model_atol(ckpt.model, expected.steps.logprobs)
    assert np.allclose(np.log(forced), np.log(steps), atol=atol, rtol=0)
    table = at.dataframe[0].value
    assert list(table["step: writes"]) == expected.steps.output_pieces
    assert np.allclose(table["forced: log p"], expected.forced.logprobs, atol=atol, rtol=0)
    assert np.allclose(table["step: log p"], expected.steps.logprobs, atol=atol, rtol=0)
    assert np.allclose(table["forced: log p"], table["step: log p"], atol=atol, rtol=0)
    assert list(table["forced: reads"])[1:] == list(table["forced: token"])[:-1]   # shifted right
    mask = array(chart(at, "tvi_mask")["data"][0]["z"])
    assert (mask == np.triu(np.ones_like(mask), k=1)).all()
    rows = chart(at, "tvi_mask")["layout"]["yaxis"]["ticktext"]            # a decoder row by the token it writes
    assert rows[0].startswith("1: writes ") and "(reads " in rows[0], rows[0]


def test_a_test_sentence_forces_its_reference(ckpt_path):
    info, _ = info_for(ckpt_path)
    examples = [e for e in sentence.examples(info.path) if e[2].strip()]
    if not examples:
        pytest.skip(f"{info.name} has no test.tsv with references")
    _, src, ref = examples[0]
    at = open_app(info.name, PAGE, text=src)
    no_exception(at)
    assert at.radio(key="tvi_forced").value == "reference"
    ckpt = load_checkpoint(info.path)
    expected = side_by_side(ckpt.model, ckpt.tokenizer, src, ref, DecodeConfig(**state.decode_settings()))
    table = at.dataframe[0].value
    assert list(table["forced: token"].dropna()) == expected.forced.output_pieces
    assert list(table["agrees"].dropna()) == expected.forced.agree
    wrong = sum(not a for a in expected.forced.agree)
    assert f"differs from the reference at {wrong} of" in texts(at.info)
    at.radio(key="tvi_forced").set_value("own").run()                       # the same sentence, own output
    no_exception(at)
    assert "Same inputs, same numbers" in texts(at.success)


@pytest.mark.parametrize("odd", ["", "🙂🚀 ✨", "<script>alert('x')</script> **b** $x$"])
def test_odd_input_is_a_message_not_a_traceback(ckpt_path, odd):
    info, _ = info_for(ckpt_path)
    at = open_app(info.name, PAGE, text=odd)
    no_exception(at)
    for md in at.markdown:
        assert "<script" not in md.value
    if not odd:
        assert "Type a sentence" in texts(at.info)


def test_positions_count_from_1_like_every_page(ckpt_path):
    """webapp/numbering.py: positions count from 1 on every page. Here the table, the two rows figures' axis
    and the sentence saying where greedy output leaves the reference counted from 0."""
    info, _ = info_for(ckpt_path)
    examples = [e for e in sentence.examples(info.path) if e[2].strip()]
    if not examples:
        pytest.skip(f"{info.name} has no test.tsv with references")
    at = None
    for _, src, _ in examples[:20]:                                         # one where greedy leaves the reference
        at = open_app(info.name, PAGE, text=src)
        if "first leaves the reference at position" in texts(at.info):
            break
    no_exception(at)
    table = at.dataframe[0].value
    assert list(table["position"]) == list(range(1, len(table) + 1))
    for key in ("tvi_forced_rows", "tvi_steps_rows"):
        assert array(chart(at, key)["data"][0]["x"])[0] == 1, key
    said = texts(at.info)
    if "first leaves the reference at position" in said:
        import re

        where = int(re.search(r"at position (\d+)", said).group(1))
        row = table[table["position"] == where].iloc[0]
        assert row["forced: token"] != row["step: writes"], (where, row)   # position `where` is where they part
        before = table[table["position"] < where]
        assert (before["forced: token"] == before["step: writes"]).all()
