"""Heads: the head lab over the checkpoint's test sentences (explorer.studies.heads): what each head does
(confidence, entropy, roles) and how much it matters (importance, single-head removal, pruning).

Thin: settings -> cost, and about how long on this machine (webapp.estimates) -> a background job in
this process (webapp.study_job, progress in an st.fragment refreshed every 2 s, Cancel) -> one JSON under
the runs directory, shown at once when it already exists for the same weights and settings ->
explorer.plots.heads.
"""
import streamlit as st

from explorer.studies.heads.importance import SINGLE_REMOVALS
from explorer.studies.common.sentences import FORCED
from explorer.studies.heads.job import HEAD_LAB, LabSettings, estimate_cost
from webapp import downloads, estimates, lecture, models, state, study_job
from webapp import url_keys as url
from webapp.views import heads as views

st.title("Heads")
state.learn(
    "Which heads matter? Over many test sentences, each head's **confidence** (its mean largest attention "
    "weight) and **entropy** tell how focused it is, and simple rules name a **role** (previous or next "
    "token, rare words, the end of the sentence; Voita et al. 2019). Its **importance** is how much the "
    "loss would change if the head's output were scaled down (Michel et al. 2019); removing heads one at a "
    "time, or least important first, shows how many the model can lose before its BLEU falls.",
    state.equations(r"I_h = \mathbb{E}_{x}\left|\frac{\partial \mathcal{L}(x)}{\partial \xi_h}\right|",
                    r"\mathrm{MultiHead}(Q,K,V) = "
                    r"\mathrm{Concat}(\xi_1 \mathrm{head}_1, \dots, \xi_H \mathrm{head}_H)\,W^O"))

ckpt = models.require_checkpoint()
pairs = study_job.held_out_or_stop(ckpt, "The head lab measures")

defaults = LabSettings()
url.seed(url.LAB_N, "heads_n", defaults.sentences, high=views.MAX_SENTENCES)
url.seed(url.LAB_FORCED, "heads_forced", defaults.forced, options=FORCED)
url.seed(url.LAB_SEEDS, "heads_seeds", defaults.seeds, high=views.MAX_SEEDS)
picked = url.seed(url.LAB_SINGLE, "heads_single", defaults.single_removal, options=tuple(SINGLE_REMOVALS))
views.say_unknown_scoring(picked)                # a link's lab_single that is no scoring: said, and what is shown
col1, col2, col3 = st.columns(3)
n = col1.number_input("Sentences (the first N test pairs)", 1, views.MAX_SENTENCES, key="heads_n")
forced = col2.radio("Teacher-force", FORCED, key="heads_forced", horizontal=True,
                    format_func={"reference": "the reference", "output": "the model's own output"}.get)
seeds = col3.number_input("Random removal orders (pruning baseline)", 0, views.MAX_SEEDS, key="heads_seeds")
single = st.radio("Score each head removed alone by", tuple(SINGLE_REMOVALS), key="heads_single", horizontal=True,
                  format_func=views.SCORINGS.get, help=views.SCORING_HELP)
url.write(url.LAB_N, "heads_n", int(n), default=defaults.sentences)    # a reload or a shared link keeps them;
url.write(url.LAB_FORCED, "heads_forced", forced, default=defaults.forced)  # the defaults stay out of the URL
url.write(url.LAB_SEEDS, "heads_seeds", int(seeds), default=defaults.seeds)
url.write(url.LAB_SINGLE, "heads_single", single, default=defaults.single_removal)
settings = LabSettings(sentences=int(n), forced=forced, seeds=int(seeds), single_removal=single)
out = views.result_path(ckpt.cache_key[1], settings)
result = HEAD_LAB.read(out)
carried = lecture.carried_query()

if result is not None:
    views.show_result(result, carried, "webapp/pages/attention.py", downloads.file_stem(ckpt.name))
    st.stop()

cost = estimate_cost(ckpt.model, settings, min(int(n), len(pairs)))
st.info(f"Not computed yet for these settings. Cost: {cost.text()}. {estimates.head_lab(ckpt, pairs, cost)}.")
study_job.tail(out, "Start the head lab", "heads",
               lambda: study_job.start(HEAD_LAB, out, "Head lab", ckpt.path, lambda _: (pairs,), settings))
