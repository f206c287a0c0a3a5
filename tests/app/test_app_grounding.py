"""AppTest: the Translate page says, under the translation, whether the model is on ground its training
data covers or guessing, in one plain sentence with the never-seen words marked."""
from __future__ import annotations

import pytest

from support.app_support import ROOT, no_exception, open_app, runs, texts  # noqa: F401

BIBLE = ROOT / "checkpoints" / "bible-es-en"
pytestmark = pytest.mark.skipif(not (BIBLE / "model.safetensors").is_file(), reason="needs checkpoints/bible-es-en")


def verdict_of(at):
    return texts(at.warning) + texts(at.success), texts(at.caption)


def test_an_everyday_sentence_is_called_a_guess_with_its_unseen_words_marked():
    at = open_app("bible-es-en", text="El presidente habló con los periodistas sobre la economía.")
    no_exception(at)
    alerts, captions = verdict_of(at)
    assert "Guessing." in alerts and "2 of 9 words never appear" in alerts.replace("\\", "")
    assert "**periodistas**" in captions and "**economía**" in captions


def test_a_held_out_verse_is_grounded():
    at = open_app("bible-es-en", text="Y dijo Dios: Sea la luz; y fué la luz.")
    no_exception(at)
    alerts, captions = verdict_of(at)
    assert "Grounded." in alerts and "Guessing." not in alerts
    # the verdict is about the input, said as such: a green box over a wrong translation read as "it is right"
    assert "its translation can still be wrong" in alerts
    assert "above it reads as guessing, below as grounded" in captions


def test_a_sentence_with_a_word_in_four_never_seen_is_partly_a_guess_not_grounded():
    """"¿Dónde está la estación?" -> "Where is the portion?" stood under a green "Grounded" box: its three Bible
    words keep both signals under the threshold, but the station it never saw is what it made up."""
    at = open_app("bible-es-en", text="¿Dónde está la estación?")
    no_exception(at)
    alerts, captions = verdict_of(at)
    assert "Partly guessing." in alerts and "Grounded." not in alerts and not texts(at.success)
    assert "what the model writes for 'estación' is a guess" in alerts.replace("\\", "")
    assert "**estación**" in captions


def test_english_typed_into_the_spanish_model_is_named_as_english():
    at = open_app("bible-es-en", text="The man went to the house of his father.")
    no_exception(at)
    alerts, _ = verdict_of(at)
    assert "This reads as English; bible-es-en reads Spanish" in alerts.replace("\\", "")


def test_the_output_words_no_source_word_brings_along_are_marked_in_the_translation():
    """The everyday sentence's made-up words are on orange in the translation box and listed under it; the
    table of where each output word comes from names a linked one's source word and counts."""
    from webapp.views.grounding import MARK

    at = open_app("bible-es-en", text="El presidente habló con los periodistas sobre la economía.")
    no_exception(at)
    box = [m.value for m in at.markdown if m.value.startswith("#### ")][0]
    _, captions = verdict_of(at)
    made_up = [w for w in ("dogs", "dungeon") if f":{MARK}[{w}]" in box]
    assert made_up and all(f"**{w}**" in captions for w in made_up)
    assert f":{MARK}[governor]" not in box              # the training data renders "presidente" as "governor"
    table = next(d.value for d in at.dataframe if "brought along by" in d.value.columns)
    governor = table[table["output word"] == "governor"].iloc[0]
    assert governor["brought along by"] == "presidente" and 2 <= governor["training pairs with both"] \
        <= governor["training pairs with that source word"]


def test_a_verse_has_no_marks():
    at = open_app("bible-es-en", text="Y dijo Dios: Sea la luz; y fué la luz.")
    no_exception(at)
    from webapp.views.grounding import MARK
    box = [m.value for m in at.markdown if m.value.startswith("#### ")][0]     # the translation's box
    assert box and f":{MARK}[" not in box


EVERYDAY = "El presidente habló con los periodistas sobre la economía."


def _learned(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_where_did_it_learn_this_reads_nothing_until_a_word_is_picked_then_lists_its_training_verses(monkeypatch):
    from explorer.studies.common import training_data
    from webapp import analyses
    from webapp.views import learned
    from webapp.views.learned import MARK

    read, real = [], training_data.dataset_pairs
    monkeypatch.setattr(training_data, "dataset_pairs", lambda dataset: read.append(dataset) or real(dataset))
    learned._word_pairs.clear()
    analyses.training_split.clear()                  # the training pairs, shared with the Features page
    at = open_app("bible-es-en", text=EVERYDAY)
    no_exception(at)
    assert at.selectbox(key="translate_learn").value is None and "learn" not in at.query_params
    captions = texts(at.caption)
    assert read == [] and ("try **dogs**" in captions or "try **dungeon**" in captions)   # a made-up word offered
    at = open_app("bible-es-en", text=EVERYDAY, query={"learn": "out.governor"})
    no_exception(at)
    assert at.selectbox(key="translate_learn").value == ("output", "governor")
    shown = _learned(at)
    assert "**governor** is in the translations of" in shown and "have **presidente** in the sentence" in shown
    verses = [m.value for m in at.markdown if m.value.startswith("- *")]
    assert verses and all(f":{MARK}[presidente]" in v.lower() and f":{MARK}[governor]" in v.lower() for v in verses)
    assert at.query_params["learn"] == "out.governor" and read == ["bible"]


def test_a_source_word_and_a_junk_url_value():
    at = open_app("bible-es-en", text=EVERYDAY, query={"learn": "src.periodistas"})
    no_exception(at)
    assert "**periodistas** is in the sentences of 0 of the" in _learned(at)
    at = open_app("bible-es-en", text=EVERYDAY, query={"learn": "src.nowhere"})    # not a word here: none
    no_exception(at)
    assert at.selectbox(key="translate_learn").value is None and "learn" not in at.query_params


def test_a_source_words_nearest_training_contexts_come_from_the_encoder_state_map():
    at = open_app("bible-es-en", text=EVERYDAY, query={"learn": "src.presidente"})
    no_exception(at)
    shown = _learned(at)
    assert "Nearest training contexts of 'presidente'" in shown
    near = [m.value for m in at.markdown if m.value.startswith("- 0.") or m.value.startswith("- 1.")]
    assert len(near) >= 5 and sum("orange-background" in v for v in near) >= 5
    cosines = [float(v.split(" ", 2)[1]) for v in near]
    assert cosines == sorted(cosines, reverse=True) and -1 <= min(cosines) <= max(cosines) <= 1.001


def test_an_output_words_nearest_contexts_come_from_the_decoder_state_map(runs):
    """A decoder-state map kept in runs/ (built here over the first 300 training pairs, to be quick) is
    read for an output word: its nearest contexts list the training targets with the word found there;
    the gradient store is still missing, so the one button that builds the training pass is offered."""
    from explorer.store.checkpoint import load_checkpoint
    from explorer.studies.grounding import states
    from explorer.studies.common.training_data import dataset_pairs as training_pairs

    ckpt = load_checkpoint(BIBLE)
    pairs = training_pairs("bible")[:300]
    outputs = states.training_outputs(ckpt.model, ckpt.tokenizer, [p.tgt for p in pairs])
    smap = states.build(ckpt.model, ckpt.tokenizer, [p.src for p in pairs], "bible", ckpt.meta["weights_sha256"],
                        train_outputs=outputs)
    states.save(smap, states.runs_map_path("bible", ckpt.meta["weights_sha256"], "output"))
    at = open_app("bible-es-en", text=EVERYDAY, query={"learn": "out.spoke"})
    no_exception(at)
    shown = _learned(at)
    assert "Nearest training contexts of 'spoke'" in shown and "the decoder's view" in shown
    near = [m.value for m in at.markdown if m.value.startswith(("- 0.", "- 1."))]
    assert len(near) >= 5 and all(" → " in v for v in near) and sum("orange-background" in v for v in near) >= 5
    assert [b for b in at.button if b.label == "Compute the training pass"]



def test_a_damaged_kept_decoder_state_map_is_said_and_offered_again(runs):
    """A kept decoder-state map that cannot be read (here: truncated) is said with its reason beside the
    button that builds the training pass again, as the gradient store's is; it was dropped in silence."""
    from explorer.store.checkpoint import read_config
    from explorer.studies.grounding import states

    meta, _ = read_config(BIBLE)
    path = states.runs_map_path("bible", meta["weights_sha256"], "output")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x10\x00\x00\x00")
    at = open_app("bible-es-en", text=EVERYDAY, query={"learn": "out.spoke"})
    no_exception(at)
    assert "The kept decoder-state map cannot be used" in texts(at.caption).replace("\\", "")
    assert [b for b in at.button if b.label == "Compute the training pass"]

def test_a_damaged_kept_state_map_is_said_in_the_verdict(runs):
    """A kept encoder-state map that cannot be read (here: empty) was skipped in silence and the verdict
    changed; the verdict now says so and reads the training counts alone."""
    from explorer.store.checkpoint import read_config
    from explorer.studies.grounding import states
    from explorer.studies.grounding.build import dataset_of

    numbers = ROOT / "checkpoints" / "numbers-en-de"
    meta, _ = read_config(numbers)
    path = states.map_path(dataset_of(meta), str(meta["weights_sha256"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    at = open_app("numbers-en-de", text="seven hundred")
    no_exception(at)
    alerts, _ = verdict_of(at)
    assert "The encoder-state map kept for this model cannot be read" in alerts.replace("\\", "")
    assert "training data's counts alone" in alerts.replace("\\", "")


def test_the_state_map_job_weighs_its_stages_by_the_sentences_each_encodes(runs, monkeypatch):
    """Its bar stood at half, "about 27 s left", with every training sentence encoded: the held-out stage
    after them is a small share of the work, and the job is told each stage's share."""
    from webapp import background

    asked = {}
    monkeypatch.setattr(background, "start", lambda path, stages, label, work, **more: asked.update(
        stages=stages, shares=more.get("shares")))
    at = open_app("numbers-en-de", text="seven hundred")
    no_exception(at)
    [button] = [b for b in at.button if b.label == "Compute the encoder-state map"]
    button.click().run()
    no_exception(at)
    trained, held = asked["shares"]
    assert asked["stages"] == ("training sentences", "held-out sentences") and trained > 10 * held > 0
