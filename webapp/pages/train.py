"""Train: start a training or fine-tuning job, watch it learn, stop and resume it.

Thin: form (webapp.views.train) -> explorer.training.launch (the trainer runs as its own process, so the page stays responsive
and a page switch never stops it) -> run files -> explorer.plots.training. The selected job's
panel is an st.fragment that re-runs alone every two seconds while the job is active.
"""
from __future__ import annotations

import streamlit as st

from explorer.store import run_paths as rp
from explorer.training import jobs
from webapp import presenter, state
from webapp import url_keys as url
from webapp.views import train as views

st.title("Train")
# The page's parts in the order of the mode (webapp.presenter.areas): on a projector the chosen job's progress
# and curves first, then the new job's form (its planned learning rate first), the jobs and the Learn panel.
area = presenter.areas(lecture=("panel", "form", "jobs", "learn"), study=("learn", "form", "jobs", "panel"))
with area["learn"]:
    state.learn(
        "Training runs as a separate process (`python -m explorer train`) writing into `runs/<name>/`: "
        "metrics, status and checkpoints. You can keep exploring while it runs; its checkpoints appear in the "
        "sidebar picker. The learning rate follows the paper's Noam schedule: linear warm-up, then 1/√step.",
        r"lr(step) = factor \cdot d_{model}^{-0.5} \cdot \min(step^{-0.5},\ step \cdot warmup^{-1.5})")

all_jobs = jobs.list_jobs()
with area["form"], st.expander("New training job", expanded=not any(j.active for j in all_jobs)):
    views.new_job_form()

all_jobs = jobs.list_jobs()                      # again: the form may have just started one
with area["jobs"]:
    st.header("Jobs")
    if not all_jobs:
        url.put(**{url.RUN.key: None})         # no job to show: a link's run= names nothing shown here
        st.info(f"No runs yet in {state.md_escape(rp.runs_root())}.")
        st.stop()
    st.fragment(views.jobs_table, run_every=2 if any(j.active for j in all_jobs) else None)()
    names = [j.name for j in all_jobs]
    url.seed(url.RUN, "tr_pick", names[0], options=names)
    chosen = st.selectbox("Show job", names, key="tr_pick")
    url.write(url.RUN, "tr_pick", chosen)
selected = all_jobs[names.index(chosen)]
with area["panel"]:
    st.fragment(views.job_panel, run_every=2 if selected.active else None)(str(selected.run_dir))
