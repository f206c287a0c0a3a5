"""Schedule: the Noam learning-rate schedule and label smoothing, as the trainer applies them.

Thin: sliders -> explorer.training.schedule (the same pure functions the trainer calls every step) ->
explorer.plots.training. Every slider and the run shown are in the URL (webapp.url_keys). A run's logged LR is drawn over its planned curve, so any mismatch
between plan and practice would show.
"""
from __future__ import annotations

import numpy as np
import streamlit as st

from explorer.training import jobs
from explorer.store import run_files as rf
from explorer.store.checkpoint import CheckpointError
from explorer.config import TrainConfig
from explorer.plots import training as plots
from explorer.training.args import planned_model_config, validate
from explorer.training.schedule import curve_steps, label_smoothing_target, noam_curve, noam_rate
from webapp import downloads, state
from webapp import url_keys as url
from webapp.text_safety import plot_escape

ANNOTATED = ((512, 4000), (512, 8000), (256, 4000))     # the Annotated Transformer's three curves

st.title("Learning-rate schedule and label smoothing")
state.learn(
    "The paper raises the learning rate linearly for `warmup` steps (Adam's moment estimates are noisy at "
    "first), then lets it decay with the inverse square root of the step. Larger models (d_model) get smaller "
    "rates; `factor` scales the whole curve. The peak is at step = warmup.",
    state.equations(r"lr(step) = factor \cdot d_{model}^{-0.5} \cdot "
                    r"\min\left(step^{-0.5},\ step \cdot warmup^{-1.5}\right)",
                    r"lr_{peak} = factor \cdot (d_{model} \cdot warmup)^{-0.5}"))

st.header("Noam schedule")
D_MODELS = (64, 128, 256, 512, 768, 1024)
url.seed(url.SC_D, "sc_d", 512, options=D_MODELS)
url.seed(url.SC_WARMUP, "sc_warmup", 4000)
url.seed(url.SC_FACTOR, "sc_factor", 1.0)
url.seed(url.SC_STEPS, "sc_steps", 20_000)
url.seed(url.SC_OVERLAY, "sc_overlay", True, options=(False, True))
c1, c2, c3, c4 = st.columns(4)
d_model = c1.select_slider("d_model", D_MODELS, key="sc_d")
warmup = c2.slider("Warm-up steps", 100, 20_000, step=100, key="sc_warmup")
factor = c3.slider("Factor", 0.1, 5.0, step=0.1, key="sc_factor")
steps = c4.slider("Steps shown", 1000, 100_000, step=1000, key="sc_steps")
overlay = st.checkbox("Overlay the Annotated Transformer's curves (factor 1): 512/4000, 512/8000, 256/4000",
                      key="sc_overlay")
for spec, widget, value in ((url.SC_D, "sc_d", d_model), (url.SC_WARMUP, "sc_warmup", warmup),
                            (url.SC_FACTOR, "sc_factor", factor), (url.SC_STEPS, "sc_steps", steps),
                            (url.SC_OVERLAY, "sc_overlay", overlay)):
    url.write(spec, widget, value)
x = curve_steps(steps, warmup)
curves = [(f"yours: {d_model}/{warmup}, factor {factor:g}", x, noam_curve(x, d_model, factor, warmup))]
if overlay:
    curves += [(f"{d}/{w}", x, noam_curve(x, d, 1.0, w)) for d, w in ANNOTATED]
downloads.chart(plots.schedule_figure(curves), "noam_schedule", key="sc_curves")
st.caption(f"Your peak: lr = {noam_rate(warmup, d_model, factor, warmup):.3g} at step {warmup}; "
           f"at step {steps}: {noam_rate(steps, d_model, factor, warmup):.3g}.")

st.header("A run's actual learning rate")
runs = [j for j in jobs.list_jobs() if rf.has_metrics(j.run_dir)]
if not runs:
    url.put(**{url.SC_RUN.key: None})          # no run to pick: a link's run= names nothing shown here
    st.info("No training run with metrics yet; start one on the Train page.")
else:
    by_name = {j.name: i for i, j in enumerate(runs)}
    url.seed(url.SC_RUN, "sc_run", 0, options=by_name)
    pick = st.selectbox("Run", range(len(runs)), format_func=lambda i: f"{runs[i].name} ({runs[i].state})",
                        key="sc_run")
    url.write(url.SC_RUN, "sc_run", pick, by_name)
    job = runs[pick]
    c = rf.read_curves(job.run_dir)
    try:
        if not job.config:
            raise ValueError("missing or not JSON")
        cfg = TrainConfig.from_dict(job.config)     # types and ranges, each named (warmup 0 divided by zero here)
        validate(cfg)                               # and the trainer's limits (warmup 10**400 overflows a float)
        run_d = planned_model_config(cfg).d_model
    except (TypeError, ValueError, CheckpointError) as err:
        st.warning(f"The run's train_config.json cannot be read ({state.md_escape(err)}); showing the logged LR only.")
        cfg, run_d = None, None
    if not len(c.step):
        st.info("This run has not logged a training step yet.")
    else:
        planned = []
        if cfg is not None and run_d:
            xs = curve_steps(max(c.step.max(), job.total_steps or 0), cfg.warmup)
            planned = [(f"planned: d_model {run_d}, warmup {cfg.warmup}, factor {cfg.lr_factor:g}", xs,
                        noam_curve(xs, run_d, cfg.lr_factor, cfg.warmup))]
            err = float(np.nanmax(np.abs(c.lr - noam_curve(c.step, run_d, cfg.lr_factor, cfg.warmup))))
            st.caption(f"Largest difference between logged and planned LR: {err:.2e}.")
        downloads.chart(plots.schedule_figure(planned, actual=(c.step, c.lr), title=f"{plot_escape(job.name)}: LR"),
                        downloads.file_stem(job.name, "lr"), key="sc_actual")

st.header("Label smoothing")
state.learn(
    "Instead of a one-hot target, the loss compares the model's prediction with a target that keeps "
    "1 − ε + ε/V on the right token and spreads ε/V over every token (PyTorch's convention, which the "
    "trainer uses). The loss is then smallest when the model is *not* fully confident, which improved "
    "BLEU in the paper at some cost in perplexity.",
    state.equations(r"q(k) = (1-\varepsilon)\,[k = y] + \frac{\varepsilon}{V}",
                    r"\mathcal{L} = -\sum_k q(k)\,\log p(k)"))
url.seed(url.SC_EPS, "sc_eps", 0.1)
url.seed(url.SC_VOCAB, "sc_vocab", 10)
c1, c2, c3 = st.columns(3)
eps = c1.slider("ε (label smoothing)", 0.0, 0.5, step=0.01, key="sc_eps")
vocab = c2.slider("Vocabulary size V (for the picture)", 2, 40, key="sc_vocab")
url.seed(url.SC_TARGET, f"sc_target_{vocab}", min(4, vocab), high=vocab)           # tokens count from 1
target = c3.slider("Correct token", 1, vocab, key=f"sc_target_{vocab}") - 1
for spec, widget, value in ((url.SC_EPS, "sc_eps", eps), (url.SC_VOCAB, "sc_vocab", vocab),
                            (url.SC_TARGET, f"sc_target_{vocab}", target + 1)):
    url.write(spec, widget, value)
dist = label_smoothing_target(vocab, target, eps)
c1, c2 = st.columns(2)
with c1:
    downloads.chart(plots.smoothing_figure(dist, target, labels=[str(i + 1) for i in range(vocab)], title=f"Target distribution (ε = {eps:g}, V = {vocab})"),
                    "label_smoothing_target", key="sc_dist")
with c2:
    downloads.chart(plots.smoothing_loss_figure(vocab, eps), "label_smoothing_loss", key="sc_loss")
st.caption(f"Right token: {dist[target]:.4f}; each other token: {dist[(target + 1) % vocab]:.4f}; sum "
           f"{dist.sum():.4f}. The trainer's loss is torch.nn.functional.cross_entropy(label_smoothing=ε).")
