"""One app-side runner for a study over a test set, written once for every page that starts one (Heads,
Alignment, Search): the held-out pairs or a clear stop, the run on a private copy of the model, the
start button, the progress with its Cancel button.

The job (webapp.background: one per result file, capped per kind and per user) loads its own copy of
the checkpoint: the analyses gate heads, zero W^O columns and hook activations, which must never touch
the shared model interactive users decode with. It runs the library's Study (explorer.studies.common.
result) with a RunContext carrying the job's progress and cancel event, so the file under the runs
directory is written once, whole, or not at all, and its folder is then kept within its bound (the oldest
results deleted: explorer.store.run_paths.prune_analysis_folder). The pairs the page already read are
handed to the job as they are (plain data), never read again.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import streamlit as st

from explorer.data.types import DataError
from explorer.studies.common.context import RunContext
from explorer.store.run_paths import prune_analysis_folder
from explorer.studies.common.result import Study
from webapp import background, models
from webapp.text_safety import md_escape


@st.cache_data(max_entries=8, show_spinner=False)
def held_out_pairs(ckpt_path: str, sha: str) -> list:
    """The checkpoint's held-out pairs (its test.tsv, else its dataset's test split); DataError if none.
    `sha` is part of the cache key: new weights at the same path read their pairs again."""
    from explorer.evaluation.scores import held_out_pairs as read_pairs
    return list(read_pairs(ckpt_path, models.load(ckpt_path).meta)[0])


def held_out_or_stop(ckpt, measured: str) -> list:
    """The loaded checkpoint's held-out pairs; without any, says that `measured` ("The head lab
    measures") needs them and how to give some, and stops the page."""
    try:
        return held_out_pairs(*ckpt.cache_key)
    except DataError as err:            # no test.tsv and no training corpus to take one from (e.g. imported)
        st.info(f"{measured} over held-out test sentences, and this checkpoint has none: "
                f"{md_escape(err)}. Put a `test.tsv` beside its config.json (a header line `ref`, `src`, "
                "`tgt` separated by tabs, then one pair per line, as in the shipped checkpoints), or choose a "
                "shipped one.")
        st.stop()


def start(study: Study, out: Path, label: str, ckpt_path: str, inputs: Callable[[object], tuple],
          settings, stages: tuple[str, ...] = (), **more) -> background.Job:
    """study.to_file(out, model, tokenizer, *inputs(private checkpoint), settings, **more) in a background
    job on a private copy of the checkpoint, or the job already running for `out`; its progress bar
    counts `stages` (default: the study's own, for a study whose stages follow from its settings)."""
    device = models.app_device()

    def work(job: background.Job) -> None:
        from explorer.store.checkpoint import load_checkpoint
        ckpt = load_checkpoint(ckpt_path, device=device)          # private, see the module docstring
        ckpt.model.eval()
        study.to_file(job.path, ckpt.model, ckpt.tokenizer, *inputs(ckpt), settings,
                      context=RunContext(meta=ckpt.meta, progress=job.progress, cancel=job.cancel), **more)
        prune_analysis_folder(job.path)                           # the folder kept within its bound

    return background.start(out, stages or study.stages, label, work)


def tail(out: Path, button: str, key: str, begin: Callable[[], object]) -> None:
    """The end of a page whose result is not computed yet: the start button (unless a job for `out` is
    running or waiting), then the job's progress and Cancel, refreshed every 2 s while it is active."""
    job = background.job_for(out)
    if job is None or not job.active:
        if st.button(button, key=f"{key}_start", type="primary"):
            begin()
    job = background.job_for(out)
    st.fragment(background.show_job, run_every=2 if job is not None and job.active else None)(str(out), key)
