"""The Features page's sites: their names and URL keys, the site picker's caption, a site's dictionary or the
background job that trains it, and its held-out figures.

Two kinds of site (explorer.studies.features.sites): each FFN, with a transcoder (what the FFN computes
from what it reads; the Graphs page replaces the FFNs by these), and each layer's output, the residual
stream, with a sparse autoencoder (what the stream holds after that layer: at the last encoder layer,
all the decoder's cross-attention can read of a source word). The FFN sites are listed first, then the
streams, labelled "Encoder layer 2: residual stream (SAE)". Both are trained by the same one-site job on
first use, with app_settings(site) (each kind at its own sizes: explorer.studies.features.job; a stream at
the command's steps and rows).
"""
from __future__ import annotations

from dataclasses import replace

import streamlit as st

from explorer.data import DataError
from explorer.studies.common.training_data import NoTrainingData, PairsUnusable, dataset_of
from explorer.studies.features.files import DictionaryUnusable
from explorer.studies.features.job import SITE, FeatureSettings, dictionary_folder, site_result_path
from explorer.studies.features.sites import all_sites, is_stream
from webapp import analyses, feature_analyses, study_job
from webapp import url_keys as url
from webapp.text_safety import md_escape

# The app's transcoders: a third of the command's steps and half its rows, so that a layer is ready while a
# class waits: on bible-es-en 128-152 s per layer on 2 cores, the machine idle (an encoder layer trains a
# plain transcoder, refuses it as dense and trains the skip one: three dictionaries), held-out FVE 0.908 at
# encoder layer 2 and 0.790 at decoder layer 3 (the command's 0.963 and 0.890), each well above its random
# baseline's (0.776, 0.350); docs/FEATURES.md.
APP_SETTINGS = FeatureSettings(steps=1_000, rows=100_000, held_rows=10_000)
APP_MINUTES = "4"            # per layer on 2 cores, with room for a busy server (docs/FEATURES.md)
# A stream's SAE (2 x d latents, no skip) costs a fraction of a transcoder's step, so the app trains it at the
# command's steps and rows, the settings its bounds were met at: numbers-en-de's first encoder stream then
# detects 9 of the 9 unit words, 7 at the transcoders' quicker settings (docs/FEATURES.md, "The stream SAEs'
# defaults").
APP_STREAM_SETTINGS = replace(APP_SETTINGS, steps=FeatureSettings.steps, rows=FeatureSettings.rows)
APP_STREAM_MINUTES = "2"     # bible-es-en's last encoder stream: 113 s on 2 cores (docs/FEATURES.md)


def app_settings(site: str) -> FeatureSettings:
    """The settings the app trains a site's dictionary at: a stream's SAE, or an FFN's transcoder."""
    return APP_STREAM_SETTINGS if is_stream(site) else APP_SETTINGS
CAPTION = ("An **FFN** site's dictionary is a transcoder: its features say what the FFN writes from what it reads, "
           "and the Graphs page chains them into circuits. A **residual stream (SAE)** site's is a sparse "
           "autoencoder of everything the layer's output holds (the attention's and every earlier layer's writes "
           "too): at the last encoder layer, all the decoder can read of a source word. Both kinds are kept because "
           "they answer different questions: how a layer computes, and what the stream carries. Single words "
           "show in the stream: on the numbers model, the first encoder layer's stream has a feature for each "
           "of the 9 English unit words (the first FFN's transcoder: 7), and setting one changes the German unit.")


def site_names(model) -> list[str]:
    """The page's sites: every FFN, then every layer's residual stream."""
    return all_sites(model)


def site_label(site: str) -> str:
    """"encoder.layers.0.ffn" -> "Encoder layer 1"; "encoder.layers.1.resid" -> "Encoder layer 2: residual
    stream (SAE)"."""
    parts = site.split(".")
    if len(parts) != 4:
        return site
    label = f"{parts[0].capitalize()} layer {int(parts[2]) + 1}"
    return f"{label}: residual stream (SAE)" if parts[3] == "resid" else label


def site_key(site: str) -> str:
    """The URL's name of a site: "enc1", "dec3" (1-based); a residual stream's "enc2r"."""
    parts = site.split(".")
    return f"{parts[0][:3]}{int(parts[2]) + 1}{'r' if parts[3] == 'resid' else ''}" if len(parts) == 4 else site


def training_or_stop(ckpt) -> tuple[str, list]:
    """(dataset, training split) of the checkpoint, or a message and a stopped page."""
    try:
        dataset = dataset_of(ckpt.meta)
        return dataset, analyses.training_split(dataset)
    except (NoTrainingData, DataError, PairsUnusable) as err:
        st.info(f"Features are learned from a model's training pairs, and this checkpoint's cannot be read here: "
                f"{md_escape(err)}. Choose a shipped checkpoint, or one trained here.")
        st.stop()


def drop_feature_keys() -> None:
    """The feature, its value and positions out of the URL, when the page stops before it draws them (a
    layer with no dictionary, no feature firing): they were kept unused, and applied to another layer's
    dictionary once one was picked."""
    url.put(**{spec.key: None for spec in (url.FEAT_ID, url.FEAT_VALUE, url.FEAT_AT)})


def forget_feature_of_another_layer(site: str) -> None:
    """A feature picked on one layer is not carried to another (each layer has its own dictionary: #127 of
    one is not #127 of the next): the new layer opens on its strongest feature, as a link to it does."""
    if st.session_state.get("_features_feature_site") not in (None, site):
        for kept in ("features_feature", "_features_feature"):          # the widget and its copy (url.write)
            st.session_state.pop(kept, None)
    st.session_state["_features_feature_site"] = site


def dictionaries_or_stop(ckpt, site: str, pairs: list):
    """The site's (dictionary, baseline, contexts); else what is missing, the start button and the job."""
    try:
        return feature_analyses.feature_site(ckpt, site, len(pairs))
    except DictionaryUnusable as err:
        problem = err
    sha = str(ckpt.meta.get("weights_sha256") or "")
    label = site_label(site)
    if dictionary_folder(sha, site, "trained").exists():
        st.warning(f"{label}'s dictionary cannot be used: {md_escape(problem)}. Training it again replaces it.")
    else:
        settings = app_settings(site)
        made = settings.train_settings(site, ckpt.model.cfg.d_model)
        what = ("residual-stream vectors (the layer's output)", "sparse autoencoder", APP_STREAM_MINUTES) \
            if is_stream(site) else ("FFN activations", "transcoder (with a linear skip if the plain one's busiest "
                                     "feature fires on more than half the tokens)", APP_MINUTES)
        st.info(f"{label} has no dictionary yet. Training one reads {settings.rows:,} {what[0]} of the "
                f"training pairs and fits a {made.width:,}-feature {what[1]} and its random baseline: "
                f"about {what[2]} minutes on two cores, in the background (other pages stay usable). "
                f"`python -m explorer features train --sites all` trains every site at once.")
    drop_feature_keys()
    held = study_job.held_out_or_stop(ckpt, "A dictionary is scored")
    out = site_result_path(sha, site)
    study_job.tail(out, f"Train {label}'s dictionary", f"features_{site_key(site)}",
                   lambda: study_job.start(SITE, out, f"Features: {label}", ckpt.path, lambda _: (pairs, held),
                                           app_settings(site), site=site))
    st.stop()


def form_said(row: dict) -> str:
    """Which transcoder the job kept ("skip" in its row; an SAE's row has none), and why."""
    if not isinstance(row.get("skip"), bool):
        return ""
    if not row["skip"]:
        return "A plain TopK transcoder (no linear skip). "
    dense = row.get("max_density_without_skip")
    steps = row.get("without_skip_steps")
    when = f" after {steps:,} training steps" if isinstance(steps, int) else ""
    why = (f": without it one feature fired on {dense:.1%} of tokens{when}, carrying the FFN's linear part"
           if isinstance(dense, float) else "")
    return f"A TopK transcoder with a linear skip{why}. "


def quality_caption(ckpt, site: str, trained) -> None:
    """The dictionary's held-out figures beside its random baseline's (the training job's result), when they
    are that of the dictionary `trained` as loaded: a training stopped after writing the dictionary and
    before its figures left the last training's figures beside it."""
    result = SITE.read(site_result_path(str(ckpt.meta.get("weights_sha256") or ""), site))
    if result is None:
        return
    row, settings = result["layer"], result.get("settings", {})
    if not isinstance(row, dict) or row.get("dictionary_sha256") != getattr(trained, "file_sha256", None):
        st.caption("This dictionary's held-out figures were not kept with it (its training stopped before "
                   "writing them?): training it again writes them; `python -m explorer features evaluate` "
                   "measures every layer's.")
        return
    linear = (f", least-squares linear map {row['fve_linear']:.3f}" if isinstance(row.get("fve_linear"), float)
              else "")
    st.caption(form_said(row) + f"Held-out fraction of variance explained {row.get('fve', float('nan')):.3f} (random-decoder baseline "
               f"{row.get('fve_random', float('nan')):.3f}{linear}); {row.get('l0', 0):.0f} features active per "
               f"token; the busiest fires on {row.get('max_density', 0):.0%} of tokens; dead "
               f"{row.get('dead_fraction', 0):.0%}. Trained {md_escape(settings.get('steps', '?'))} steps on "
               f"{md_escape(row.get('rows', '?'))} rows.")
