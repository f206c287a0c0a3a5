"""Search: the beam-size curve over the checkpoint's held-out pairs (explorer.studies.contrastive.job): what a
wider beam buys under the model and against the references, and with exact search how often each beam
size misses the model's own best output (a search error).

Thin: settings (kept in the URL) -> a background job in this process (webapp.study_job, progress in an
st.fragment refreshed every 2 s, Cancel) -> one JSON under the runs directory, shown at once when it
already exists for the same weights and settings -> explorer.plots.contrastive.
"""
import streamlit as st

from explorer.studies.contrastive.job import BEAM_CURVE, stage_names
from webapp import downloads, models, state, study_job
from webapp.numbering import count
from webapp.views import search as views

st.title("Search: the beam-size curve")
state.learn(
    "A wider beam finds translations the model scores higher, but not always better ones: past a few "
    "hypotheses BLEU often falls as the beam grows (the **beam-search curse**, Koehn & Knowles 2017). "
    "Stahlberg & Byrne (2019) showed why: the model's own best output, found by **exact search**, is often "
    "short, even empty, so a search that finds it better is worse. Here each beam size decodes the first "
    "test pairs; with exact search, a **search error** is a sentence where the beam missed an output the "
    "model scores higher. A length penalty divides the score by a function of the length, so longer "
    "outputs are not punished for every extra word.",
    state.equations(r"\hat y_k = \operatorname*{beam}_k\; \frac{\log p(y \mid x)}{lp(|y|)}",
                    r"\text{search error}_k(x) = \big[\max_y \log p(y \mid x) > \log p(\hat y_k \mid x)\big]"))

ckpt = models.require_checkpoint()
pairs = study_job.held_out_or_stop(ckpt, "The beam curve is measured")

settings = views.settings_form(ckpt.model, max(1, min(len(pairs), 5000)))
if settings is None:
    st.stop()
out = views.result_path(ckpt.cache_key[1], settings)
result = BEAM_CURVE.read(out)
if result is not None:
    views.show_result(result, downloads.file_stem(ckpt.name))
    st.stop()

st.info(f"Not computed yet for these settings: {count(settings.sentences, 'sentence')} decoded with "
        f"{count(len(settings.beams) * len(settings.parsed), 'beam setting')}"
        + (f", exact search on {settings.exact_sentences} of them" if settings.exact else "") +
        ". For scale: bible-es-en's whole test set (1,002 verses) at six beam sizes takes about 14 minutes "
        "on two cores; the small numbers models take seconds.")
study_job.tail(out, "Start the beam curve", "search", lambda: study_job.start(
    BEAM_CURVE, out, "Beam curve", ckpt.path, lambda _: (pairs,), settings, stages=stage_names(settings)))
