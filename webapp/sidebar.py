"""The shared sidebar: presenter mode and the checkpoint picker (both kept in the URL), a multilingual
model's language pair (webapp.languages), the chosen model's card, the device in use."""
from __future__ import annotations

from pathlib import Path

import streamlit as st
import torch

from explorer.store.card import model_card, summary, versus_paper
from explorer.files.names import MULTILINGUAL_LANGUAGES
from explorer.store.catalog import CheckpointInfo
from explorer.store.errors import CheckpointError
from webapp import languages, models, presenter, sentence, state, url_keys
from webapp.text_safety import shortened

PICK = "ckpt_pick"        # the picker's value: the chosen checkpoint's path, its identity on disk
LISTED = "_ckpt_listed"   # the last run's listing, {path: name}
GONE = "_ckpt_gone"       # (name asked for, path used instead, why): said until the user picks another
PICKER_HELP = (
    "Listed from, in this order: **checkpoints/** (the models shipped with the app); the folder named by "
    "**$EXPLORER_MODELS_DIR**, when set (your own or imported models, e.g. from "
    "`python -m explorer convert from-hf`; the app only reads it, never writes there); the runs directory "
    "(**runs/**, or $EXPLORER_RUNS_DIR: training runs started here). $EXPLORER_CHECKPOINT_ROOTS, folders "
    "separated by `:`, replaces all three. The list is re-read every 30 seconds, and at once when a link "
    "names a checkpoint it lacks.")


def render() -> None:
    infos = _listing()
    st.sidebar.title("Transformer Explorer")
    presenter.toggle()                                   # first: a teacher finds it at once
    problem = state.models_dir_problem()
    if problem:
        st.sidebar.warning(f"Your models folder ({state.MODELS_ENV}) is not listed: {state.md_escape(problem)}.")
    if not infos:
        st.sidebar.error("No checkpoint found in checkpoints/, your models folder or runs/. Train one: "
                         "`python -m explorer train --dataset numbers --preset tiny --tokenizer-type word`")
        st.session_state["checkpoint_path"] = None
        return
    by_path = {str(i.path): i for i in infos}
    labels = _labels(infos)
    links = dict(zip(by_path, state.link_names(infos)))         # path -> what the link names it by
    _keep_choice(by_path, links)
    paths = list(by_path)
    # The default index is the choice too: a browser that has not taken the value set above (a page switched
    # to just after the first run) sends back its default, and index 0 (the first listed) then switched a
    # session's model under it.
    path = st.sidebar.selectbox("Checkpoint", paths, index=paths.index(st.session_state[PICK]), key=PICK,
                                format_func=lambda p: labels.get(p, str(p)), on_change=_picked, args=(by_path,),
                                help=PICKER_HELP)
    info = by_path[path]
    st.session_state["checkpoint_path"] = path
    st.session_state[LISTED] = {p: i.name for p, i in by_path.items()}
    url_keys.put(ckpt=links[path])
    gone = st.session_state.get(GONE)
    if gone and gone[1] == path:
        why = ("is not on disk any more (deleted, or pruned by a training run)" if gone[2] == "vanished"
               else "named by the link is not here")
        name = gone[0] if gone[2] == "vanished" else shortened(gone[0])      # a link's name may be 100 KB
        st.sidebar.warning(f"The checkpoint **{state.md_escape(name)}** {why}, so "
                           f"**{state.md_escape(info.name)}** is in use now. Pick another one above if you like.")
    else:
        st.session_state.pop(GONE, None)
    if info.error:
        st.sidebar.error(f"Damaged checkpoint: {state.md_escape(info.error)}")
    else:
        train = info.meta.get("training") or {}
        step = f"step {state.md_escape(train['step'])} · " if isinstance(train, dict) and "step" in train \
            else ""                                                                          # imported: none
        langs = f"{info.meta.get('src_lang', '?')} → {info.meta.get('tgt_lang', '?')}"       # config.json's
        st.sidebar.caption(f"{state.md_escape(langs)} · {step}{info.size_bytes / 1e6:.0f} MB on disk")
    multilingual = MULTILINGUAL_LANGUAGES in ((info.meta.get("tokenizer") or {}).get("files") or ())
    if multilingual and not info.error:                  # M2M100 / NLLB: the language pair's pickers
        try:
            languages.render(models.load(path))
        except CheckpointError:
            pass                                         # the page says why it cannot load
    else:
        languages.render(None)
    card_expander(info)                                  # a damaged one's says "no model card"
    device = models.app_device()
    name = f"CUDA ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else device.type.upper()
    st.sidebar.caption(f"Device: {name}")
    st.sidebar.radio("Figure download format", ("png", "svg"), key="figure_format", horizontal=True,
                     format_func=str.upper, help="What the camera button in each figure's toolbar saves.")


def _listing() -> list[CheckpointInfo]:
    """The checkpoints to offer. The listing is cached for 30 s (state.available_checkpoints), so it can lack
    a checkpoint made since (imported, or saved by a run) and, computed in another session just before a
    refresh, can even be older than one: when it lacks the checkpoint this session uses (or, on a fresh
    session, the one its link names), the folders are read again once before anything is chosen, so a stale
    listing never switches the model nor lands a link on another one."""
    infos = state.available_checkpoints()
    chosen = st.session_state.get(PICK) or st.session_state.get("checkpoint_path")
    if chosen:
        missing = not any(str(i.path) == chosen for i in infos)
    else:
        wanted = url_keys.raw(url_keys.CKPT)
        missing = bool(wanted) and wanted not in {i.name for i in infos} | set(state.link_names(infos))
    if missing:
        state.refresh_checkpoints()
        infos = state.available_checkpoints()
    return infos


def _picked(by_path: dict[str, CheckpointInfo]) -> None:
    """The user picked another checkpoint (runs before the page, while checkpoint_path is the old one)."""
    st.session_state.pop(GONE, None)
    old, new = by_path.get(st.session_state.get("checkpoint_path") or ""), by_path.get(st.session_state.get(PICK))
    if old is not None and new is not None and old.path != new.path:
        sentence.follow_checkpoint(old, new)


def card_expander(info: CheckpointInfo) -> None:
    """The chosen model's card, folded: where it comes from, its licence, languages, size and the
    text it knows (explorer.store.card), and its shape next to the paper's base model."""
    found = None if info.error else model_card(info.card)
    with st.sidebar.expander("Model card"):
        st.caption(state.md_escape(summary(found)))
        if found is not None and found.data:
            st.caption("Data: " + state.md_escape(found.data))
        if found is not None and found.fine_tuned_from:
            st.caption("Fine-tuned from " + state.md_escape(found.fine_tuned_from))
        if found is not None and found.converted:
            st.caption("Converted " + state.md_escape(found.converted + (f" with {found.tool}" if found.tool else "")))
        elif found is not None and found.tool:
            st.caption("Card written by " + state.md_escape(found.tool))
        shape = versus_paper(info.meta.get("model"))
        if shape:
            st.caption("This model vs the paper: " + state.md_escape(shape))


def _labels(infos: list[CheckpointInfo]) -> dict[str, str]:
    """The picker's label of each checkpoint path. The browser sends the chosen label back, so two
    folders with the same name and metadata get their path added to stay distinguishable."""
    labels = {str(i.path): state.checkpoint_label(i) for i in infos}
    count: dict[str, int] = {}
    for label in labels.values():
        count[label] = count.get(label, 0) + 1
    return {p: f"{label} · {p}" if count[label] > 1 else label for p, label in labels.items()}


def _keep_choice(by_path: dict[str, CheckpointInfo], links: dict[str, str]) -> None:
    """Set the picker's value (a path) before it is drawn.

    The listing changes under the app: a training run saves checkpoints that may sort before the
    chosen one and prunes old ones (keep_last). The choice is kept by path, so what sorts around it
    does not matter. It is set on every run, so the browser is sent the label it must show every time
    (its label can change, and a browser that missed a run's value would otherwise show, and send back,
    the picker's default). When the chosen folder is gone, another is used and GONE makes the sidebar say
    so, naming both, instead of switching model silently. A fresh session starts on the URL's
    checkpoint (a shared link: `links`, state.link_names, tells apart two folders of one name; a link
    naming only the name opens the first listed), else the default one, else the first listed.
    """
    picked, in_use = st.session_state.get(PICK), st.session_state.get("checkpoint_path")
    listed = st.session_state.get(LISTED) or {}
    chosen = picked if picked is not None else in_use
    if chosen in by_path:
        url_keys.hold(PICK, chosen)
        return
    if chosen is None:                           # a fresh session
        wanted, why = url_keys.raw(url_keys.CKPT), "link"
        named = [p for p, link in links.items() if link == wanted] or [p for p, i in by_path.items() if i.name == wanted]
        if named:
            url_keys.hold(PICK, named[0])
            return
    else:                                        # deleted, or pruned, since the last run
        wanted, why = listed.get(chosen, Path(chosen).name), "vanished"
        if any(i.name == wanted for i in by_path.values()):     # another folder holds a model of that name
            wanted = f"{wanted} (folder {chosen})"
    default = [p for p, i in by_path.items() if i.name == state.DEFAULT_CHECKPOINT]
    fallback = in_use if in_use in by_path else default[0] if default else next(iter(by_path))
    url_keys.hold(PICK, fallback)
    if wanted:
        st.session_state[GONE] = (wanted, fallback, why)
