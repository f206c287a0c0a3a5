"""AppTest of the sidebar's checkpoint picker while checkpoints come and go on disk.

A training run saves new checkpoints and prunes old ones (keep_last) while the app is open, and the
listing is re-read every 30 s: the checkpoint in use must stay the one the user picked (the same
folder, whatever now sorts before it), and if that folder disappears the app must say so rather
than switch model silently. And picking a checkpoint that fails to load, then a healthy one again,
must keep what the user had typed. Checkpoints here are copies of the shipped numbers-en-de in a
temporary folder (EXPLORER_CHECKPOINT_ROOTS), each with its own training step, so the sidebar's
caption tells them apart.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.app_support import (ROOT, copy, damage, default_roots, example_picker, no_exception,  # noqa: F401 - a fixture
                                  open_app, texts)
from webapp import sentence, state

SOURCE = ROOT / "checkpoints" / "numbers-en-de"


@pytest.fixture
def root(tmp_path, monkeypatch):
    """An empty checkpoint root listed instead of checkpoints/ and runs/ (the listing forgotten before
    and after, so no other test sees it)."""
    if not (SOURCE / "model.safetensors").is_file():
        pytest.skip(f"needs the shipped checkpoint {SOURCE.name}")
    folder = tmp_path / "ckpts"
    folder.mkdir()
    monkeypatch.setenv(state.ROOTS_ENV, str(folder))
    state.refresh_checkpoints()
    yield folder
    state.refresh_checkpoints()


def add(root, name: str, step: int, model_name: str | None = None):
    """A healthy checkpoint folder `name` whose config says training step `step` (and the model's name
    `model_name`: a copy of a folder keeps the model's name)."""
    path = copy(SOURCE, root / name)
    meta = json.loads((path / "config.json").read_text())
    meta["training"]["step"] = step
    if model_name is not None:
        meta["name"] = model_name
    (path / "config.json").write_text(json.dumps(meta))
    state.refresh_checkpoints()                     # what the 30 s listing refresh does
    return path


def remove(path) -> None:
    shutil.rmtree(path)
    state.refresh_checkpoints()


def picker(at):
    return at.sidebar.selectbox(key="ckpt_pick")


def shown_label(at) -> str:
    box = picker(at)
    return box.options[box.index]


def pick(at, name: str):
    """Choose `name` in the picker, as a user does: by the label it shows."""
    box = picker(at)
    labels = [o for o in box.options if o.startswith(name + " ")]
    assert len(labels) == 1, (name, box.options)
    box.select_index(box.options.index(labels[0]))
    return at.run()


def assert_in_use(at, path, step: int) -> None:
    """Everything that names the checkpoint in use agrees on `path` (a checkpoint with `step`)."""
    no_exception(at)
    assert at.session_state["checkpoint_path"] == str(path)
    assert shown_label(at).startswith(path.name + " "), shown_label(at)
    assert f"step {step} " in texts(at.sidebar.caption), texts(at.sidebar.caption)
    assert at.query_params["ckpt"] == path.name


def test_the_chosen_checkpoint_stays_chosen_when_others_come_and_go(root):
    early = add(root, "run-b", 200)
    chosen = add(root, "run-c", 300)
    add(root, "run-d", 400)
    at = open_app("run-d", text="three hundred")
    assert_in_use(at, root / "run-d", 400)
    assert_in_use(pick(at, "run-c"), chosen, 300)

    add(root, "run-a", 100)                          # a new run saves one that sorts earlier
    assert_in_use(at.run(), chosen, 300)
    remove(early)                                    # keep_last prunes an earlier one
    assert_in_use(at.run(), chosen, 300)
    add(root, "run-0", 50)                           # both at once: as many options as before
    remove(root / "run-a")
    assert_in_use(at.run(), chosen, 300)
    assert not at.sidebar.warning


def test_the_pickers_default_is_the_checkpoint_in_use(root):
    """A browser that has not yet taken the value the script set sends back the picker's default on the next
    page switch: that default must be the checkpoint in use, not the first listed (which switched a session
    opened by link onto another model in a real browser)."""
    for name, step in (("run-a", 100), ("run-b", 200), ("run-c", 300)):
        add(root, name, step)

    def default_label(at) -> str:
        box = picker(at)
        return box.options[box.proto.default]
    at = open_app("run-c", text="three hundred")
    assert_in_use(at, root / "run-c", 300)
    assert default_label(at).startswith("run-c ")
    assert default_label(pick(at, "run-b")).startswith("run-b ")
    box = picker(at.run()).proto                  # a run that changed nothing still sends the value
    assert box.set_value and box.raw_value.startswith("run-b ")


def test_a_vanished_checkpoint_is_reported_not_silently_replaced(root):
    add(root, "run-b", 200)
    chosen = add(root, "run-c", 300)
    add(root, "run-d", 400)
    at = pick(open_app("run-b", text="three hundred"), "run-c")
    assert_in_use(at, chosen, 300)

    remove(chosen)
    at.run()
    no_exception(at)
    now = at.session_state["checkpoint_path"]
    now_name = Path(now).name
    assert now != str(chosen) and now_name in ("run-b", "run-d")
    warning = texts(at.sidebar.warning).replace("\\", "")
    assert "run-c" in warning and now_name in warning, warning
    assert shown_label(at).startswith(now_name + " ") and at.query_params["ckpt"] == now_name
    at.run()                                         # still said on the next rerun ...
    assert "run-c" in texts(at.sidebar.warning).replace("\\", "")
    at = pick(at, "run-b" if now_name == "run-d" else "run-d")
    no_exception(at)
    assert not at.sidebar.warning                    # ... until the user picks one


def test_a_vanished_checkpoint_whose_name_another_folder_shares_is_named_by_its_folder(root):
    add(root, "run-b", 200)
    twin = add(root, "run-c", 300)
    chosen = add(root, "run-c-copy", 300, model_name="run-c")
    at = open_app("run-b", text="three hundred")
    picker(at).set_value(str(chosen)).run()
    assert at.session_state["checkpoint_path"] == str(chosen)
    remove(chosen)
    at.run()
    no_exception(at)
    warning = texts(at.sidebar.warning).replace("\\", "")
    assert str(chosen).replace("\\", "") in warning and twin.exists(), warning   # not just "run-c", still listed


def test_a_link_to_one_of_two_checkpoints_of_one_name_reopens_that_one(root):
    """The sidebar wrote ckpt=<name>: a link to a run's copy of a model named like another folder opened
    the first listed of that name, a different model, with no notice."""
    first = add(root, "run-c", 300)
    chosen = add(root, "run-c-copy", 200, model_name="run-c")
    at = open_app("run-c", text="three hundred")
    assert at.session_state["checkpoint_path"] == str(first) and at.query_params["ckpt"] == f"run-c@{first}"
    picker(at).set_value(str(chosen)).run()
    link = at.query_params["ckpt"]
    assert link == f"run-c@{chosen}"
    again = open_app(link, text="three hundred")             # the shared link, in a fresh session
    no_exception(again)
    assert again.session_state["checkpoint_path"] == str(chosen)
    assert "step 200 " in texts(again.sidebar.caption) and not again.sidebar.warning


def test_a_link_to_a_missing_checkpoint_says_so(root):
    add(root, "run-b", 200)
    at = open_app("run-gone", text="three hundred")
    assert_in_use(at, root / "run-b", 200)
    warning = texts(at.sidebar.warning).replace("\\", "")
    assert "run-gone" in warning and "run-b" in warning, warning


def test_a_link_to_a_checkpoint_made_since_the_last_listing_opens_it(root):
    add(root, "run-b", 200)
    assert_in_use(open_app("run-b", text="three hundred"), root / "run-b", 200)    # the listing is cached now
    made = copy(SOURCE, root / "run-new")                 # e.g. just imported: no refresh_checkpoints() here
    assert "run-new" not in [i.name for i in state.available_checkpoints()]
    at = open_app("run-new", text="three hundred")
    no_exception(at)
    assert at.session_state["checkpoint_path"] == str(made) and at.query_params["ckpt"] == "run-new"
    assert not at.sidebar.warning


def test_a_stale_listing_that_lacks_the_checkpoint_in_use_is_read_again_not_obeyed(root, monkeypatch):
    """A listing computed by another session just before a checkpoint was saved can be cached after it: the
    sidebar reads the folders again rather than call the checkpoint in use vanished and switch model."""
    add(root, "run-b", 200)
    chosen = add(root, "run-c", 300)
    at = pick(open_app("run-b", text="three hundred"), "run-c")
    assert_in_use(at, chosen, 300)
    real, forget = state.available_checkpoints, state.refresh_checkpoints
    stale = [i for i in real() if i.name != "run-c"]           # what a listing made before run-c existed says
    read_again = []
    monkeypatch.setattr(state, "refresh_checkpoints", lambda: read_again.append(1) or forget())
    monkeypatch.setattr(state, "available_checkpoints", lambda: real() if read_again else stale)
    assert_in_use(at.run(), chosen, 300)
    assert read_again and not at.sidebar.warning


def test_picking_one_that_just_vanished_keeps_the_one_in_use(root):
    add(root, "run-b", 200)
    late = add(root, "run-c", 300)
    at = open_app("run-b", text="three hundred")
    remove(late)                                     # pruned while the dropdown was open
    at = pick(at, "run-c")
    assert_in_use(at, root / "run-b", 200)
    warning = texts(at.sidebar.warning).replace("\\", "")
    assert "run-c" in warning and "run-b" in warning, warning


def browser_shows(widget) -> str:
    """What the browser shows in a text box it draws afresh (it was not on the page in the run
    before): the value the server sends with it (set_value), else the widget's default."""
    return widget.proto.value if widget.proto.set_value else widget.proto.default


@pytest.mark.parametrize("page, typed", [
    ("translate", {"text_box": "three hundred and five", "manual_reference": "dreihundertfünf"}),
    ("attention", {"attn_text_box": "three hundred and five"}),
    ("beam", {"beam_text": "three hundred and five"}),
])
def test_what_was_typed_survives_a_checkpoint_that_fails_to_load(root, page, typed):
    """A damaged checkpoint stops the page before its inputs are drawn, so the browser drops them;
    back on a healthy checkpoint it draws them again and must be handed what the user had typed
    (else it shows them empty, sends that back on the next rerun, and the sentence is lost)."""
    damage(SOURCE, root / "run-a", "header")         # listed as "(damaged)"; cannot be loaded
    add(root, "run-b", 200)
    at = open_app("run-b", page=f"webapp/pages/{page}.py")
    for key, value in typed.items():
        find(at, key).set_value(value)
    at.run()
    no_exception(at)
    sentence = next(iter(typed.values()))
    assert at.session_state["text"] == sentence and at.query_params["text"] == sentence

    at = pick(at, "run-a")
    no_exception(at)
    assert "cannot be used" in texts(at.error)
    assert all(find(at, key, required=False) is None for key in typed)   # the page stopped before them

    at = pick(at, "run-b")
    no_exception(at)
    for key, value in typed.items():
        assert browser_shows(find(at, key)) == value, key
        find(at, key).set_value(browser_shows(find(at, key)))    # the browser sends what it shows
    at.run()                                                     # on the next rerun
    no_exception(at)
    assert at.session_state["text"] == sentence and at.query_params["text"] == sentence
    for key, value in typed.items():
        assert find(at, key).value == value, key


def find(at, key: str, required: bool = True):
    """The text box (text_area or text_input) with widget key `key` on the page."""
    for kind in ("text_area", "text_input"):
        found = [w for w in at.get(kind) if w.key == key]
        if found:
            return found[0]
    assert not required, f"no text box {key!r} on the page"
    return None


def test_switching_language_brings_the_new_models_sentence_but_keeps_a_typed_one(default_roots):
    """A test verse the app opened on is Spanish; after switching to the English-reading numbers
    model, the box holds one of that model's own test sentences (on every page that shows it). A
    sentence the user typed is theirs: it stays through the switch."""
    bible, numbers = ROOT / "checkpoints" / "bible-es-en", ROOT / "checkpoints" / "numbers-en-de"
    if not all((p / "model.safetensors").is_file() for p in (bible, numbers)):
        pytest.skip("needs both shipped checkpoints")
    state.refresh_checkpoints()
    at = open_app("bible-es-en")                                  # a fresh visit: the showcase verse
    opened = at.session_state["text"]
    assert sentence.reference_for(bible, opened) is not None
    picker(at).set_value(str(numbers)).run()
    no_exception(at)
    now = at.session_state["text"]
    assert now != opened and sentence.reference_for(numbers, now) is not None
    assert at.query_params["text"] == now and at.text_area(key="text_box").value == now
    assert "numbers-en-de" == at.query_params["ckpt"]

    picker(at).set_value(str(bible)).run()                        # and back: a Spanish verse again
    assert sentence.reference_for(bible, at.session_state["text"]) is not None

    example = example_picker(at)
    example.set_value(5).run()                                    # a verse picked from the list
    assert at.session_state["text"] == sentence.examples(bible)[5][1]
    picker(at).set_value(str(numbers)).run()                      # the picker is the numbers model's now
    example = example_picker(at)
    assert example.value is None and example.options[0].startswith(sentence.examples(numbers)[0][0])
    at.text_area(key="text_box").set_value("twenty one").run()    # typing after the switch
    no_exception(at)
    assert at.session_state["text"] == "twenty one"
    picker(at).set_value(str(bible)).run()

    typed = "Dios es amor, dijo el maestro."
    at.text_area(key="text_box").set_value(typed).run()
    picker(at).set_value(str(numbers)).run()
    no_exception(at)
    assert at.session_state["text"] == typed and at.text_area(key="text_box").value == typed


def test_the_example_picker_lets_go_of_a_verse_once_the_sentence_is_typed(default_roots):
    """Picked from the list, the verse shows in the picker; typed over, the picker shows none (it would
    claim the box holds a test verse, and its reference would seem to apply)."""
    bible = ROOT / "checkpoints" / "bible-es-en"
    if not (bible / "model.safetensors").is_file():
        pytest.skip("needs the shipped bible-es-en")
    state.refresh_checkpoints()
    at = open_app("bible-es-en")
    example = example_picker(at)
    example.set_value(3).run()
    no_exception(at)
    assert example_picker(at).value == 3
    at.text_area(key="text_box").set_value("Dios es amor.").run()
    no_exception(at)
    assert example_picker(at).value is None
    assert at.session_state["text"] == "Dios es amor."


@pytest.mark.parametrize("page", ["attention", "beam", "architecture", "training_vs_inference"])
def test_a_first_visit_to_any_page_opens_on_the_models_sentence(default_roots, page):
    """Not only the Translate page: a link straight to another page opens on the same test sentence
    (an empty box and "Type a sentence" is a dead end for a student's first click)."""
    bible = ROOT / "checkpoints" / "bible-es-en"
    if not (bible / "model.safetensors").is_file():
        pytest.skip("needs the shipped bible-es-en")
    state.refresh_checkpoints()
    at = open_app("bible-es-en", page=f"webapp/pages/{page}.py")
    no_exception(at)
    opened = at.session_state["text"]
    assert opened == sentence.opening_sentence(str(bible)) and sentence.reference_for(bible, opened) is not None
    assert "Type a sentence" not in texts(at.info)
    assert at.query_params["text"] == opened
