"""Features: what a layer's numbers mean. A sparse dictionary of each FFN (a TopK transcoder) or of
each layer's residual stream (a TopK sparse autoencoder; explorer.studies.features) names the features
active at each position of the sentence; one feature's
page shows where it fires in the training pairs and what removing it does; steering sets it and
translates again.

Thin: the shared sentence and its translation (webapp.sentence) -> the layer's dictionary, trained in the
background on first use (webapp.views.features, webapp.study_job) -> the library through webapp.feature_analyses'
cached computations -> explorer.plots.features.
"""
import streamlit as st

from webapp import downloads, feature_analyses, models, presenter, sentence, state
from webapp import url_keys as url
from webapp.views import features as views

st.title("Features")
area = presenter.areas(lecture=("sentence", "features", "learn"), study=("learn", "sentence", "features"))
with area["learn"]:
    state.learn(
        "A layer writes a vector per word (256 numbers in the Bible model), and no single number means much. A "
        "**transcoder** (Dunefsky et al. "
        "2024) learns to stand in for a layer's FFN with many more **features** than numbers, of which only a "
        "few (*k*) are active for any word: each feature reads one direction of what the FFN reads and writes "
        "one direction of what it writes, so a feature can be named from where it fires. Ours are TopK "
        "transcoders (Gao et al. 2024), trained on the FFN's activations over the model's own training pairs, "
        "with a linear **skip** map beside the features (Paulo et al. 2025) where without it one feature would "
        "fire on most words, carrying the FFN's linear part (the layer's caption says which); each layer's output, the residual stream, has a sparse autoencoder (**SAE**) too, "
        "whose features say what the stream holds rather than what the FFN computes. Each is trained beside a "
        "**random baseline** with frozen random directions: a feature claim means "
        "little unless the trained dictionary beats it. Pick a layer, then a feature: its page shows the "
        "training sentences where it fires most, and **steering** sets it to a value of your choosing and "
        "translates again.",
        state.equations(r"z = \mathrm{TopK}_k\big(\mathrm{ReLU}(x W_{\mathrm{enc}} + b_{\mathrm{enc}})\big)",
                        r"\widehat{\mathrm{FFN}}(x) = z W_{\mathrm{dec}} + x W_{\mathrm{skip}}^\top + b_{\mathrm{dec}}",
                        r"W_{\mathrm{skip}} = 0 \text{ in a plain transcoder}",
                        r"\text{steer feature } f \text{ to } v:\ \ \mathrm{FFN}(x) + (v - z_f)\, W_{\mathrm{dec},f}"))

with area["sentence"]:
    ckpt = models.require_checkpoint()
    cfg = state.decode_settings()
    text, clipped, result = sentence.page_translation(ckpt, "features_text_box", cfg, "to see its features.")
name = downloads.file_stem(ckpt.name)
with area["features"]:
    dataset, pairs = views.training_or_stop(ckpt)
    names = views.site_names(ckpt.model)
    keys = {views.site_key(s): s for s in names}
    url.seed(url.FEAT_SITE, "features_site", names[0], options=keys)
    site = st.selectbox("Layer: its FFN (a transcoder) or its output, the residual stream (an SAE)", names,
                        key="features_site", format_func=views.site_label)
    st.caption(views.SITES_CAPTION)
    url.write(url.FEAT_SITE, "features_site", site, options=keys, default=names[0])
    views.forget_feature_of_another_layer(site)
    tc, _baseline, index = views.dictionaries_or_stop(ckpt, site, pairs)
    views.quality_caption(ckpt, site, tc)
    stamp = feature_analyses.feature_stamp(ckpt, site)
    found = state.friendly(feature_analyses.sentence_features, ckpt, site, stamp, len(pairs), tuple(result.src_ids),
                           tuple(result.best.ids), what="Reading the features")
    if found is None:
        st.stop()
    labels = views.position_labels(ckpt, site, result)
    views.sentence_section(ckpt, site, found, labels, name)
    active = views.active_features(found)
    linked = views.linked_feature(tc.width)                         # a feature a link names, firing here or not
    options = active + ([linked] if linked is not None and linked not in active else [])
    if not options:
        st.info("No feature of this layer fires in this sentence.")
        views.drop_feature_keys()
        st.stop()
    url.seed(url.FEAT_ID, "features_feature", options[0], options=options, exact=True)
    feature = st.selectbox("Feature (those active in this sentence, strongest first)", options, key="features_feature",
                           format_func=lambda f: f"#{f}")
    url.write(url.FEAT_ID, "features_feature", int(feature), options=options)
    views.feature_card(ckpt, site, int(feature), index, pairs, dataset, stamp, name)
    views.steering_section(ckpt, site, int(feature), index, found, labels, result, stamp, len(pairs), name)
