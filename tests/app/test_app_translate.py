"""AppTest of the Translate page (the home page) on real checkpoints.

It runs and shows the library's own translation, the settings change the decoding, test examples
come with BLEU/chrF against their reference, the URL restores the sentence, bad input gives
messages (never a traceback), and a damaged checkpoint is reported while the rest still works.
"""
from __future__ import annotations

import numpy as np
import pytest
import sacrebleu

from support.app_support import (array, chart, checkpoint_params, copy, damage, example_picker, info_for, no_exception,
                                  open_app, shown_translation, texts)
from support.numerics import model_atol
from explorer.store.checkpoint import load_checkpoint
from explorer.config import DecodeConfig
from explorer.decoding import translate
from explorer.evaluation.showcase import best_translated
from explorer.store.card import model_card
from webapp import sentence, state

pytestmark = pytest.mark.parametrize("ckpt_path", checkpoint_params())


def translation_shown(at) -> str:
    """The text of the translation box (markdown '#### ...', escapes and marks undone)."""
    return shown_translation(at)


def test_shows_the_library_translation(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, text=text)
    no_exception(at)
    ckpt = load_checkpoint(info.path)
    expected = translate(ckpt.model, ckpt.tokenizer, text, DecodeConfig(strategy="beam", beam_size=5, n_best=5))
    assert translation_shown(at) == expected.text.replace("\\", "")
    nbest = at.dataframe[0].value
    assert len(nbest) == len(expected.hypotheses)
    assert list(nbest["translation"]) == [h.text for h in expected.hypotheses]
    assert list(nbest.columns[:3]) == ["rank", "normalised", "translation"]      # the ranking's score in sight
    probs = array(chart(at, "token_probs")["data"][0]["y"])
    # the page's search and this one: the same inputs and shapes (model_atol covers a kernel that adds in
    # another order from call to call); a probability moves by at most its log's change
    atol = model_atol(ckpt.model, expected.best.token_logprobs)
    assert np.allclose(probs, np.exp(expected.best.token_logprobs), atol=atol, rtol=0)
    codes = [c.value for c in at.code]
    assert " ".join(expected.src_pieces) in codes and " ".join(expected.best.pieces) in codes
    assert at.session_state["decode_cfg"]["strategy"] == "beam"
    assert at.query_params["text"] == text and at.query_params["ckpt"] == info.name
    labels = {b.proto.label for b in at.get("download_button")}
    assert {"Download the whole analysis (JSON)", "Download per-token probabilities (CSV)"} <= labels


def test_settings_change_the_decoding(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, text=text)
    at.radio(key="dec_strategy").set_value("greedy").run()
    no_exception(at)
    assert at.session_state["decode_cfg"]["strategy"] == "greedy"
    assert len(at.dataframe[0].value) == 1
    at.radio(key="dec_strategy").set_value("sample").run()
    at.slider(key="dec_samples").set_value(4).run()
    no_exception(at)
    table = at.dataframe[0].value
    assert "seed" in table.columns and 1 <= len(table) <= 4
    assert "Samples" in texts(at.markdown)
    at.radio(key="dec_strategy").set_value("beam").run()
    at.slider(key="dec_beam").set_value(2).run()
    at.slider(key="dec_nbest").set_value(2).run()
    no_exception(at)
    assert at.session_state["decode_cfg"]["beam_size"] == 2
    ckpt = load_checkpoint(info.path)
    expected = translate(ckpt.model, ckpt.tokenizer, text, DecodeConfig(**at.session_state["decode_cfg"]))
    nbest = at.dataframe[0].value
    assert len(nbest) == len(expected.hypotheses) == 2                # min(n_best, beam_size), never empty
    assert list(nbest["translation"]) == [h.text for h in expected.hypotheses]


def test_examples_carry_their_reference_and_scores(ckpt_path):
    info, _ = info_for(ckpt_path)
    examples = sentence.examples(info.path)
    if not examples:
        pytest.skip(f"{info.name} has no test.tsv")
    at = open_app(info.name)                         # a fresh visit opens on the best-translated example
    no_exception(at)
    ckpt = load_checkpoint(info.path)
    found = best_translated(ckpt.model, ckpt.tokenizer, [(src, tgt) for _, src, tgt in examples])
    assert at.session_state["text"] == examples[found.index][1] and examples[found.index][2].strip()
    assert translation_shown(at) == found.translation.replace("\\", "")
    assert float(next(m.value for m in at.metric if m.label == "chrF")) == pytest.approx(found.chrf, abs=0.051)
    example_picker(at).set_value(2).run()
    no_exception(at)
    ref, src, tgt = examples[2]
    assert at.session_state["text"] == src and at.text_area(key="text_box").value == src
    hyp = translation_shown(at)
    metrics = {m.label: float(m.value) for m in at.metric}
    assert metrics["BLEU"] == pytest.approx(round(sacrebleu.sentence_bleu(hyp, [tgt]).score, 1), abs=0.051)
    assert metrics["chrF"] == pytest.approx(round(sacrebleu.sentence_chrf(hyp, [tgt]).score, 1), abs=0.051)


def test_typed_reference_gives_scores(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, text=text)
    assert not at.metric
    at.text_input(key="manual_reference").set_value("a reference").run()
    no_exception(at)
    assert {m.label for m in at.metric} == {"BLEU", "chrF"}
    scores = {m.label: m.value for m in at.metric}
    assert at.query_params["ref"] == "a reference"                         # a shared link scores the same
    again = open_app(info.name, query=dict(at.query_params))
    no_exception(again)
    assert again.text_input(key="manual_reference").value == "a reference"
    assert {m.label: m.value for m in again.metric} == scores
    again.text_input(key="manual_reference").set_value("").run()
    assert "ref" not in again.query_params and not again.metric


def test_url_restores_the_sentence(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, query={"text": text})
    no_exception(at)
    assert at.text_area(key="text_box").value == text
    assert translation_shown(at)


@pytest.mark.parametrize("bad, message", [
    ("", "Type a sentence"),
    ("   ", "Type a sentence"),
])
def test_empty_input_is_a_friendly_message(ckpt_path, bad, message):
    info, _ = info_for(ckpt_path)
    at = open_app(info.name, text=bad)
    no_exception(at)
    assert message in texts(at.info)
    assert not at.get("plotly_chart")


def test_long_input_is_truncated_with_a_notice(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, text=(text + " ") * 200)           # well over 5,000 characters
    no_exception(at)
    warnings = texts(at.warning)
    assert f"only the first {sentence.MAX_CHARS:,}" in warnings
    assert "longer than this model can read" in warnings      # and past the model's max_len
    assert translation_shown(at) is not None


@pytest.mark.parametrize("odd", ["🙂🚀 ✨", "Ελληνικά 中文 العربية", "<img src=x onerror=alert(1)>",
                                 "<script>alert('x')</script> **bold** $x$ [a](javascript:alert(1))"])
def test_odd_input_is_shown_as_text(ckpt_path, odd):
    info, _ = info_for(ckpt_path)
    at = open_app(info.name, text=odd)
    no_exception(at)
    for md in at.markdown:                                     # nothing unescaped reaches markdown
        assert "<img" not in md.value and "<script" not in md.value
    assert at.text_area(key="text_box").value == odd


def test_unknown_input_is_named_not_translated_silently(ckpt_path):
    info, text = info_for(ckpt_path)
    unknown = {"es": ("Y dijo Dios 🙂 中文", ["🙂", "中文"]), "en": ("one million and two", ["million"])}
    odd, parts = unknown.get(info.meta.get("src_lang"), unknown["es"])
    at = open_app(info.name, text=odd)
    no_exception(at)
    warning = texts(at.warning).replace("\\", "")
    assert "not in this model's vocabulary" in warning and f"{len(parts)} part(s)" in warning, warning
    assert all(f"“{p}”" in warning for p in parts), warning
    at.text_area(key="text_box").set_value(text).run()            # a sentence it knows: no notice
    assert "vocabulary" not in texts(at.warning)
    for page in ("architecture", "positions", "attention", "beam", "training_vs_inference"):   # every page that translates
        other = open_app(info.name, page=f"webapp/pages/{page}.py", text=odd)
        no_exception(other)
        shown = texts(other.warning).replace("\\", "")
        assert "not in this model's vocabulary" in shown and all(f"“{p}”" in shown for p in parts), (page, shown)


def test_typing_changes_the_translation(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, text=text)
    first = translation_shown(at)
    at.text_area(key="text_box").set_value(text.split()[0]).run()
    no_exception(at)
    assert at.session_state["text"] == text.split()[0] and at.query_params["text"] == text.split()[0]
    assert len(text.split()) > 1 and translation_shown(at) != first


@pytest.mark.parametrize("how", ["bytes", "header", "config"])
def test_damaged_checkpoint_is_reported_and_the_rest_works(ckpt_path, tmp_path, monkeypatch, how):
    info, text = info_for(ckpt_path)
    root = tmp_path / "ckpts"
    damage(info.path, root / "a-broken", how)
    copy(info.path, root / "b-good")
    monkeypatch.setenv(state.ROOTS_ENV, str(root))
    at = open_app("a-broken", text=text)
    no_exception(at)
    assert at.sidebar.selectbox(key="ckpt_pick").value == str(root / "a-broken")
    assert at.error, "the damaged checkpoint must be reported"
    assert "cannot be used" in texts(at.error) and "Damaged" in texts(at.sidebar.error)
    assert "Pick a working checkpoint" in texts(at.info)
    at.sidebar.selectbox(key="ckpt_pick").set_value(str(root / "b-good")).run()  # the rest still works
    no_exception(at)
    assert not at.error
    assert translation_shown(at)


def test_the_model_card_domain_is_shown_by_the_input(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, text=text)
    no_exception(at)
    card = model_card(info.card)
    known = next(c.value for c in at.main.caption if "What this model knows" in c.value).replace("\\", "")
    assert (card.domain if card and card.domain else "does not say") in known


def test_token_ids_and_heavily_split_words_are_shown(ckpt_path):
    info, text = info_for(ckpt_path)
    odd = {"es": ("Multiplicaré el smartphone", ["Multiplicaré"])}.get(info.meta.get("src_lang"))
    at = open_app(info.name, text=odd[0] if odd else text)
    no_exception(at)
    ckpt = load_checkpoint(info.path)
    expected = translate(ckpt.model, ckpt.tokenizer, odd[0] if odd else text,
                         DecodeConfig(strategy="beam", beam_size=5, n_best=5))
    src = next(d.value for d in at.dataframe if "source piece" in d.value.columns)
    out = next(d.value for d in at.dataframe if "output piece" in d.value.columns)
    assert list(src["id"]) == expected.src_ids and list(src["source piece"]) == expected.src_pieces
    assert list(out["id"]) == expected.best.ids and list(out["output piece"]) == expected.best.pieces
    assert src["id"].iloc[-1] == ckpt.config.eos_id
    captions = " ".join(c.value for c in at.main.caption).replace("\\", "")
    if odd:                                         # 1909 Spanish the vocabulary barely knows
        assert "Heavily split words" in captions and all(w in captions for w in odd[1])
    else:                                           # a word-level model splits nothing
        assert "Heavily split words" not in captions
