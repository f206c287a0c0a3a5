"""The Graphs page's dictionaries: a graph replaces every FFN of the model by its transcoder, so it needs
one for EVERY site, where the Features page needs only the layer open. Those the app or `python -m explorer
features train` already made are used as they are; the missing ones are trained by one background job
that runs the Features page's one-site training (explorer.studies.features.job.SITE, the app's settings
webapp.views.features.APP_SETTINGS) for each missing site in turn, each site's files written as it ends
(a cancel keeps the sites already finished), with one progress bar over all of them.
"""
from __future__ import annotations

import hashlib

import streamlit as st

from explorer.files.names import FEATURES
from explorer.store.run_paths import runs_root
from explorer.studies.common.context import RunContext
from explorer.studies.features.files import DictionaryUnusable
from explorer.studies.features.job import SITE, dictionary_folder, site_result_path
from explorer.studies.features.sites import sites
from webapp import background, feature_analyses, models, study_job
from webapp import url_keys as url
from webapp.numbering import count
from webapp.text_safety import md_escape
from webapp.views.features import APP_MINUTES, APP_SETTINGS, site_label, training_or_stop

LABEL = "Dictionaries"              # the job's kind: one such job at a time in the server (background.py)


def missing_sites(ckpt) -> dict[str, str]:
    """{site: why it cannot be used} for every FFN site without a usable dictionary (empty: all ready)."""
    missing = {}
    for site in sites(ckpt.model):
        try:
            feature_analyses.graph_dictionary(ckpt, site)
        except DictionaryUnusable as err:
            missing[site] = str(err)
    return missing


def stamp(ckpt) -> str:
    """What every site's dictionary files are now (sizes and times), as a short digest: a graph's result
    file is named with it, so a dictionary trained again makes its graphs anew."""
    found = [feature_analyses.feature_stamp(ckpt, site) for site in sites(ckpt.model)]
    return hashlib.sha256(repr(found).encode()).hexdigest()[:12]


def job_path(sha: str):
    """The all-sites job's identity in background's table (one per checkpoint's weights; nothing is written
    there: each site's own files are)."""
    return runs_root() / FEATURES / str(sha)[:16] / "every-site"


def ready_or_offer(ckpt) -> dict:
    """{site: trained transcoder} for every FFN site; else what is missing, how long training them takes,
    the start button and the job's progress, and the page stops."""
    missing = missing_sites(ckpt)
    if not missing:
        return {site: feature_analyses.graph_dictionary(ckpt, site) for site in sites(ckpt.model)}
    # A graph's nodes, picked node and intervention name features of dictionaries this model lacks: a link's
    # (or the last model's) would be read against dictionaries trained later, whose features are others.
    url.put(**{k.key: None for k in (url.GRAPH_NODES, url.GRAPH_NODE, url.GRAPH_CHANGE, url.GRAPH_VALUE)})
    _dataset, pairs = training_or_stop(ckpt)                      # training them reads the training pairs
    names = list(missing)
    every = len(sites(ckpt.model))
    sha = str(ckpt.meta.get("weights_sha256") or "")
    damaged = [s for s in names if dictionary_folder(sha, s, "trained").exists()]     # there, but unusable
    st.info(f"A graph replaces every FFN of the model by its dictionary (a transcoder), and "
            f"{count(len(names), 'layer')} of {every} {'has' if len(names) == 1 else 'have'} "
            f"{'none it can use' if damaged else 'none yet'}: "            # a damaged one is said below
            f"{', '.join(site_label(s) for s in names)}. Training them reads {APP_SETTINGS.rows:,} FFN activations "
            f"of the training pairs per layer and fits a {APP_SETTINGS.width:,}-feature transcoder (with a linear "
            f"skip where the plain one's busiest feature fires on more than half the tokens) and its random "
            f"baseline, one layer after another: about {int(APP_MINUTES) * len(names)} minutes on two cores "
            f"({APP_MINUTES} per layer, measured on bible-es-en; the time goes to the training steps, so a small "
            "model takes about as long), in the background (other pages stay usable). `python -m explorer features "
            "train` trains every layer at once, at fuller settings.")
    for site in damaged:
        st.warning(f"{site_label(site)}'s dictionary cannot be used: {md_escape(missing[site])}. Training it "
                   "again replaces it.")
    held = study_job.held_out_or_stop(ckpt, "A dictionary is scored")
    out = job_path(sha)
    study_job.tail(out, f"Train every missing layer's dictionary ({len(names)})", "graphs_dictionaries",
                   lambda: start(out, ckpt.path, names, pairs, held))
    st.stop()


def start(out, ckpt_path, names: list[str], pairs: list, held: list) -> background.Job:
    """One background job: the one-site training of each of `names` in turn, on a private copy of the
    checkpoint; the progress bar has one stage per site."""
    device = models.app_device()
    stages = tuple(site_label(s) for s in names)
    def work(job: background.Job) -> None:
        from explorer.store.checkpoint import load_checkpoint
        ckpt = load_checkpoint(ckpt_path, device=device)         # the shared model is never hooked
        ckpt.model.eval()
        sha = str(ckpt.meta.get("weights_sha256") or "")
        for stage, site in zip(stages, names):
            steps = APP_SETTINGS.trainings(site) * APP_SETTINGS.steps + 1     # every training it may need, contexts

            def progress(kind: str, done: int, _total: int, stage=stage, steps=steps) -> bool:
                return job.progress(stage, done if kind == "dictionaries" else steps - 1 + done, steps)
            SITE.to_file(site_result_path(sha, site), ckpt.model, ckpt.tokenizer, pairs, held, APP_SETTINGS,
                         site=site, context=RunContext(meta=ckpt.meta, progress=progress, cancel=job.cancel))

    return background.start(out, stages, LABEL, work, keeps_stages=True)      # each layer's dictionary is its own
