"""What every page shares besides the model: URL and session state, the checkpoint listing and its labels,
the decoding settings, the Learn panel and friendly errors (the sentence: webapp.sentence; the shared model
and its computations: webapp.models, which reads this module and is never read by it).

- The URL carries the view (checkpoint, text, page, layer, head, kind, step): webapp.url_keys, the one
  way the app reads and writes it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import streamlit as st

from explorer.store import run_paths as rp
from explorer.store.catalog import CheckpointInfo, list_checkpoints
from explorer.store.checkpoint import CheckpointError
from webapp import presenter, url_keys
from webapp.text_safety import md_escape, visible_controls  # noqa: F401 - pages escape text from files as state.md_escape

ROOTS_ENV = "EXPLORER_CHECKPOINT_ROOTS"  # os.pathsep-separated folders to list instead (tests, users)
MODELS_ENV = "EXPLORER_MODELS_DIR"     # a user's own models (imported ones): listed, never written
DEFAULT_CHECKPOINT = "bible-es-en"


# ---- checkpoints ----------------------------------------------------------------------------
def checkpoint_roots() -> tuple[Path, ...]:
    """Where the picker looks, in its order: the shipped checkpoints/, the user's models folder
    ($EXPLORER_MODELS_DIR, when set), the runs directory (explorer.store.run_files' roots).
    $EXPLORER_CHECKPOINT_ROOTS (folders separated by os.pathsep) replaces them all."""
    env = os.environ.get(ROOTS_ENV, "").strip()
    if env:
        return tuple(Path(p).expanduser() for p in env.split(os.pathsep) if p.strip())
    mine = models_dir()
    return (rp.shipped_root(),) + ((mine,) if mine else ()) + (rp.runs_root(),)


def models_dir() -> Path | None:
    """The user's models folder ($EXPLORER_MODELS_DIR), or None when unset. The app only reads it:
    checkpoints there are listed and loaded, never written, moved or deleted."""
    env = os.environ.get(MODELS_ENV, "").strip()
    return Path(env).expanduser() if env else None


def runs_dir_problem() -> str | None:
    """Why the runs folder ($EXPLORER_RUNS_DIR) cannot be used (a file, a FIFO), else None: every page
    reads or writes there (runs, analyses, uploads), so the app says this and nothing else."""
    try:
        rp.runs_root()
    except rp.RunsDirError as err:
        return str(err)
    return None


def models_dir_problem() -> str | None:
    """Why the models folder cannot be listed (missing, not a folder, unreadable), else None."""
    folder = models_dir()
    if folder is None or os.environ.get(ROOTS_ENV, "").strip():       # unset, or not looked at
        return None
    try:
        if not folder.is_dir():
            return f"{folder} does not exist" if not folder.exists() else f"{folder} is not a folder"
        next(folder.iterdir(), None)
    except OSError as err:
        return f"{folder} cannot be read ({err.strerror or err})"
    return None


def available_checkpoints() -> list[CheckpointInfo]:
    """Each root's checkpoints in checkpoint_roots()' order (shipped, the user's models, runs),
    by path within a root (re-listed every 30 s, or at once after refresh_checkpoints())."""
    return _available_checkpoints(tuple(str(r) for r in checkpoint_roots()))


def run_of_checkpoint(ckpt):
    """The run (explorer.evaluation.comparison.RunGroup) whose checkpoints include the loaded `ckpt`, or
    None: the checkpoints the Checkpoints page's scrubber steps through, in training order."""
    from explorer.evaluation.comparison import runs_of

    here = Path(str(ckpt.path)).resolve()
    return next((g for g in runs_of(available_checkpoints())
                 if any(Path(str(i.path)).resolve() == here for i in g.checkpoints)), None)


@st.cache_data(ttl=30, show_spinner=False)     # listing 14 checkpoints costs ~0.35 s of CPU
def _available_checkpoints(roots: tuple[str, ...]) -> list[CheckpointInfo]:
    found: dict[Path, CheckpointInfo] = {}
    for root in roots:
        try:
            listed = list_checkpoints(root) if Path(root).is_dir() else []
        except OSError:                                  # listing never raises; a folder may still vanish
            listed = []
        for info in listed:
            found.setdefault(info.path, info)            # a root inside another: listed once, first root wins
    return list(found.values())


def refresh_checkpoints() -> None:
    """Forget the cached listing now (a training job just saved a checkpoint)."""
    _available_checkpoints.clear()


def link_names(infos) -> list[str]:
    """What a link names each of `infos` by (the sidebar's `ckpt=`, the Checkpoints page's `a=`/`b=`): its
    name, or `name@path` where two listed share a name (a run's copy of a shipped model), so a shared link
    reopens the same folder, not the first listed of that name."""
    count: dict[str, int] = {}
    for info in infos:
        count[info.name] = count.get(info.name, 0) + 1
    return [i.name if count[i.name] == 1 else f"{i.name}@{i.path}" for i in infos]


def checkpoint_label(info: CheckpointInfo) -> str:
    if info.error:
        return visible_controls(f"{info.name} (damaged)")
    langs = f"{info.meta.get('src_lang', '?')}→{info.meta.get('tgt_lang', '?')}"
    test = info.card.get("test") if isinstance(info.card, dict) else None     # card.json is untrusted
    beam = test.get("beam5") if isinstance(test, dict) else None
    bleu = beam.get("bleu") if isinstance(beam, dict) else None
    extra = f", test BLEU {bleu:.1f}" if isinstance(bleu, (int, float)) and not isinstance(bleu, bool) else ""
    params = f", {info.n_params / 1e6:.1f}M params" if info.n_params else ""
    return visible_controls(f"{info.name} ({langs}{params}{extra})")     # a picker's label is shown as it is


def decode_settings() -> dict:
    """The decoding settings chosen on the Translate page (shared by the other pages); on a fresh
    session, the URL's (a shared link: webapp.decode_url), else the app's defaults."""
    if "decode_cfg" not in st.session_state:
        from webapp import decode_url

        st.session_state["decode_cfg"], st.session_state["_dec_samples_url"] = decode_url.from_query(
            url_keys.texts(decode_url.SETTINGS))
    return st.session_state["decode_cfg"]


# ---- small shared widgets --------------------------------------------------------------------
def equations(*lines: str) -> str:
    """Several equations as one LaTeX block, one centred line each (KaTeX's gathered and aligned run a
    few pixels past a narrow column; a one-column array with room between its rows does not)."""
    return r"\def\arraystretch{1.6}\begin{array}{c}" + r"\\ ".join(r"\displaystyle " + line for line in lines) \
        + r"\end{array}"


def learn(text: str, formula: str | None = None) -> None:
    """The 'Learn' panel each page opens with: two or three sentences and the formula (state.equations
    for several).

    Open by default so a student sees it first; one click folds it away. Folded in presenter mode, so
    that the page's result is on the projector's first screen (the teacher opens it to talk about it).
    """
    with st.expander("Learn: what am I looking at?", expanded=not presenter.on()):
        st.markdown(text)
        if formula:
            st.html(_WIDE_FORMULA_CSS)             # style only: takes no space
            st.latex(formula)


# A formula wider than the page (a laptop at 1024 px, or presenter mode's large type) scrolls sideways
# instead of being cut off at the right edge.
_WIDE_FORMULA_CSS = "<style>.katex-display { overflow-x: auto; overflow-y: hidden; }</style>"


def friendly(fn: Callable, *args, what: str = "This", **kwargs):
    """Run a library call; show a clear message instead of a traceback on failure."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, CheckpointError, KeyError, RuntimeError) as err:
        st.error(f"{md_escape(what)} could not be done: {md_escape(err)}")   # `what` may name a checkpoint
        return None
