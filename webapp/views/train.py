"""The Train page's parts: the new-job form (datasets, presets, the fine-tuning recipe and its notes),
the jobs table, and the selected job's panel (progress, ETA, curves, stop and resume).

The trainer runs as its own process (explorer.training.launch), so the page stays responsive and a
page switch never stops it; the panel reads only what the trainer writes (explorer.store.run_files).
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import streamlit as st

from explorer.training import jobs, launch, uploads
from explorer.store import run_files as rf
from explorer.store import run_paths as rp
from explorer.store.checkpoint import CheckpointError
from explorer.store.metrics import Curves
from explorer.config import PRESETS, TrainConfig
from explorer.data import DataError
from explorer.plots import training as plots
from explorer.text.tokenizer import MODEL_TYPES
from explorer.training import args
from explorer.training.args import planned_model_config
from explorer.training.notes import warmup_note, zero_bleu_note
from explorer.training.schedule import (UNRECORDED_CEILING, UNRECORDED_PEAK, FineTune, curve_steps,
                                        fine_tune_schedule, noam_curve, noam_rate)
from webapp import downloads, presenter, state, url_keys
from webapp.numbering import count
from webapp.text_safety import md_cells

DATASETS = {"numbers": "Number words, English → German (learns in minutes)",
            "bible": "Bible, Spanish → English (hours on CPU)", "upload": "My own TSV file (source<TAB>target)"}
DEFAULTS = {  # per dataset: what learns visibly on these machines
    "numbers": dict(preset="tiny", tokenizer_type="word", vocab_size=8000, max_steps=300, batch_tokens=2000,
                    warmup=200, lr_factor=0.5, eval_every=100, save_every=100),
    "bible": dict(preset="small", tokenizer_type="bpe", vocab_size=8000, max_steps=3000, batch_tokens=4000,
                  warmup=800, lr_factor=0.7, eval_every=300, save_every=300),
    "upload": dict(preset="tiny", tokenizer_type="bpe", vocab_size=4000, max_steps=1000, batch_tokens=2000,
                   warmup=400, lr_factor=1.0, eval_every=200, save_every=200),
}
# The form's bounds. The lower ones and keep_last's are the trainer's own limits (explorer.training.args);
# the other upper ones are the form's, kept below those limits (which guard the command line against
# slips such as extra zeros): what a lesson's machine trains in reasonable time.
FORM_MAX = dict(steps=min(1_000_000, args.MAX_STEPS, args.MAX_EPOCHS), batch_tokens=min(200_000, args.MAX_BATCH_TOKENS),
                warmup=100_000, every=100_000, vocab_size=min(64_000, args.MAX_VOCAB_SIZE), eval_sentences=5000,
                threads=min(64, args.MAX_THREADS))
COLORS = {"running": "green", "starting": "orange", "finished": "blue", "failed": "red", "stopped": "gray",
          "unknown": "violet"}


def _d_model(cfg: TrainConfig) -> int | None:
    """d_model of the model `cfg` trains, for its planned learning rate; None when it cannot be known."""
    try:
        return planned_model_config(cfg).d_model
    except (CheckpointError, ValueError):
        return None


def _dataset(choice: str) -> str | None:
    if choice != "upload":
        return choice
    upload = st.file_uploader("Parallel text, one pair per line: source<TAB>target "
                              f"(UTF-8, up to {uploads.UPLOAD_MAX_BYTES >> 20} MB)",
                              type=["tsv", "txt"], key="tr_upload")
    if upload is None:
        st.info("Upload a file to train on it.")
        return None
    cache = st.session_state.setdefault("tr_uploads", {})
    if upload.file_id not in cache:                    # validate each upload once, not on every rerun
        try:
            cache[upload.file_id] = uploads.save_upload(upload.getvalue(), upload.name)
        except DataError as err:
            cache[upload.file_id] = f"File refused: {err}"
        except uploads.UploadNotSaved as err:          # a full disk: uploading the same file again tries again
            cache[upload.file_id] = str(err)
    if isinstance(cache[upload.file_id], str):
        st.error(state.md_escape(cache[upload.file_id]))
        return None
    path, report = cache[upload.file_id]
    if not Path(path).is_file():                       # pruned since (uploads.py): others uploaded since
        st.error(f"{state.md_escape(rp.clean_upload_name(upload.name))} was removed from the server to make room "
                 "for newer uploads; upload it again to train on it.")
        return None
    size = f"{report.bytes / 1e6:.1f} MB" if report.bytes >= 100_000 else f"{report.bytes / 1e3:.1f} kB"
    header = (f"; line 1 was read as a header: {state.md_escape(' / '.join(report.header))}" if report.header
              else "")                                 # is_header's guess, said: `oui<TAB>yes` may be a real pair
    st.success(f"{state.md_escape(rp.dataset_label(str(path)))}: {count(report.pairs, 'sentence pair')} accepted "
               f"({size}){header}.")
    st.dataframe(pd.DataFrame([{"source": p.src, "target": p.tgt} for p in report.sample]), hide_index=True)
    return str(path)


def _fine_tune_recipe(info) -> FineTune | None:
    d_model = (info.meta.get("model") or {}).get("d_model")
    return fine_tune_schedule(info.meta.get("training") or {}, int(d_model)) if isinstance(d_model, int) else None


def _fine_tune_notes(recipe: FineTune, warmup: int, lr_factor: float, d_model: int) -> None:
    """What the proposed fine-tuning schedule does, and a warning when the settings leave it."""
    peak = noam_rate(warmup, d_model, lr_factor, warmup)
    if recipe.ended_at is None:                    # an imported model: its training left no record here
        st.caption(f"Fine-tuning recipe: {recipe.warmup} warm-up steps to a fixed, conservative peak of "
                   f"{recipe.peak:.2g}. This checkpoint does not record how its training ended (a model imported "
                   "from Hugging Face carries neither its training step nor its learning rate), so the usual "
                   f"recipe, half the rate training ended at, cannot be computed; {UNRECORDED_PEAK:.0e} is the rate "
                   "OPUS-MT models are commonly fine-tuned at. Fine-tuned here, the new checkpoint records "
                   "its own rate.")
        if peak > UNRECORDED_CEILING:
            st.warning(f"The planned peak rate {peak:.2g} is above {UNRECORDED_CEILING:.0e}, the peak of Marian's "
                       "own training recipe for such models: fine-tuning at it may undo what the model learned.")
        return
    ended = "it recorded" if recipe.ended_at_known else "estimated from its step"
    st.caption(f"Fine-tuning recipe: {recipe.warmup} warm-up steps to a peak of {recipe.peak:.2g}, half the rate "
               f"this checkpoint's training ended at ({recipe.ended_at:.2g}, {ended}); restarting the from-scratch "
               "schedule would throw the trained model far off.")
    if peak > recipe.ended_at:
        st.warning(f"The planned peak rate {peak:.2g} is above the rate this checkpoint's training ended at "
                   f"({recipe.ended_at:.2g}): fine-tuning at it may undo what the model learned.")


def new_job_form() -> None:
    """The form, the planned learning rate of its settings and the Start button. On a projector (presenter
    mode) the planned rate comes first, so that the page shows a figure on its first screen before any job
    ran; the settings follow it (webapp.presenter.areas)."""
    parts = presenter.areas(lecture=("plan", "settings", "start"), study=("settings", "plan", "start"))
    with parts["settings"]:
        choice = st.radio("Data", list(DATASETS), format_func=DATASETS.get, horizontal=True, key="tr_data")
        d = DEFAULTS[choice]
        dataset = _dataset(choice)
        k = f"tr_{choice}_"
        c1, c2 = st.columns(2)
        url_keys.hold(k + "name", st.session_state.get(k + "name") or f"{choice}-{time.strftime('%m%d-%H%M%S')}")
        name = c1.text_input("Run name (folder under runs/)", key=k + "name", max_chars=64,
                             help=f"A new folder directly under runs/: {jobs.NAME_RULE}.")
        start_from = c2.radio("Start from", ["scratch", "checkpoint"], horizontal=True, key=k + "from",
                              format_func={"scratch": "Scratch (a preset)", "checkpoint": "Fine-tune a checkpoint"}.get)
        init_from, preset_name = None, d["preset"]
        if start_from == "scratch":
            preset_name = c2.selectbox("Preset", list(PRESETS), index=list(PRESETS).index(d["preset"]), key=k + "preset")
        else:
            healthy = [i for i in state.available_checkpoints() if not i.error]
            if not healthy:
                c2.warning("No working checkpoint to fine-tune from.")
                return
            pick = c2.selectbox("Checkpoint", range(len(healthy)), key=k + "init",
                                format_func=lambda i: state.checkpoint_label(healthy[i]))
            init_from = str(healthy[pick].path)
        recipe = _fine_tune_recipe(healthy[pick]) if init_from else None
        c1, c2, c3, c4 = st.columns(4)
        by_epochs = c1.toggle("Length in epochs", key=k + "by_epochs")
        steps = c1.number_input("Epochs" if by_epochs else "Steps", 1, FORM_MAX["steps"],
                                3 if by_epochs else d["max_steps"], key=k + ("epochs" if by_epochs else "steps"))
        batch_tokens = c2.number_input("Batch tokens", args.MIN_BATCH_TOKENS, FORM_MAX["batch_tokens"], d["batch_tokens"],
                                       step=500, key=k + "batch")
        tuned = f"_ft{pick}" if recipe else ""                 # own widgets (and defaults) per checkpoint fine-tuned
        warmup = c3.number_input("Warm-up steps", 1, FORM_MAX["warmup"], recipe.warmup if recipe else d["warmup"],
                                 key=k + "warmup" + tuned)
        lr_factor = c4.number_input("LR factor", 0.0001, 10.0, round(recipe.lr_factor, 4) if recipe else d["lr_factor"],
                                    step=0.01 if recipe else 0.1, format="%.4f", key=k + "lr" + tuned)
        smoothing = c1.number_input("Label smoothing ε", 0.0, 0.99, 0.1, step=0.05, key=k + "ls")
        eval_every = c2.number_input("Evaluate every (steps)", 0, FORM_MAX["every"], d["eval_every"], key=k + "eval")
        save_every = c3.number_input("Checkpoint every (steps)", 0, FORM_MAX["every"], d["save_every"], key=k + "save")
        keep_last = c4.number_input("Keep last checkpoints", 1, args.MAX_KEEP_LAST, 20, key=k + "keep")
        with st.expander("More settings"):
            c1, c2, c3, c4 = st.columns(4)
            tok = c1.selectbox("Tokenizer", MODEL_TYPES, index=MODEL_TYPES.index(d["tokenizer_type"]), key=k + "tok",
                               help="Ignored when fine-tuning (the checkpoint's tokenizer is kept).")
            vocab = c2.number_input("Vocabulary size", args.MIN_VOCAB_SIZE, FORM_MAX["vocab_size"], d["vocab_size"],
                                    key=k + "vocab")
            eval_sentences = c3.number_input("Dev sentences per evaluation", 0, FORM_MAX["eval_sentences"], 100,
                                             key=k + "evaln")
            threads = c4.number_input("CPU threads", 1, FORM_MAX["threads"], 1, key=k + "threads")
            gpus = launch.gpu_count()
            nproc = c1.number_input("Processes (torchrun, one per GPU)", 1, gpus, 1, key=k + "nproc") if gpus > 1 else 1
        try:
            try:                                   # the name as typed: a folder directly under runs/, or refused
                run_dir, name_problem = jobs.run_dir_for(name), None
            except jobs.JobError as err:
                run_dir, name_problem = rp.runs_root() / "unnamed", err
            cfg = TrainConfig(run_dir=str(run_dir), dataset=dataset or "", preset=preset_name,
                              init_from=init_from, tokenizer_type=tok, vocab_size=int(vocab),
                              max_steps=int(steps) if not by_epochs else 1, epochs=float(steps) if by_epochs else None,
                              batch_tokens=int(batch_tokens), warmup=int(warmup), lr_factor=float(lr_factor),
                              label_smoothing=float(smoothing), eval_every=int(eval_every), save_every=int(save_every),
                              keep_last=int(keep_last), eval_sentences=int(eval_sentences), threads=int(threads))
        except (TypeError, ValueError) as err:
            st.error(f"Invalid settings: {state.md_escape(err)}")
            return
    with parts["plan"]:
        d_model = _d_model(cfg)
        short = None if by_epochs else warmup_note(int(steps), int(warmup))
        if short:
            st.warning(short)
        if recipe and d_model:
            _fine_tune_notes(recipe, int(warmup), float(lr_factor), d_model)
        if d_model and not by_epochs:
            x = curve_steps(steps, cfg.warmup)
            downloads.chart(plots.schedule_figure([(f"planned (d_model={d_model})", x, noam_curve(
                x, d_model, cfg.lr_factor, cfg.warmup))], title="Planned learning rate"), "planned_lr", key="tr_planned")
    with parts["start"]:
        if st.button("Start training", type="primary", disabled=dataset is None, key="tr_start"):
            try:
                if name_problem is not None:
                    raise name_problem
                job = launch.start(cfg, nproc=int(nproc))
            except jobs.JobError as err:
                st.error(f"Not started: {state.md_escape(err)}")
                return
            url_keys.hold("tr_pick", job.name)                   # the page's job picker shows it (and the URL's run)
            del st.session_state[k + "name"]
            st.success(f"Started **{state.md_escape(job.name)}**. Its progress and curves are on this page.")


def jobs_table() -> None:
    """Every run under runs/ (its own fragment: refreshed while any job is active)."""
    rows = [{"run": j.name, "state": j.state,
             "step": f"{j.step}/{j.total_steps or '?'}",
             "data": rp.dataset_label(str(j.config.get("dataset", "?"))),
             "preset": j.config.get("preset") if not j.config.get("init_from") else "fine-tune",
             "checkpoints": len(j.checkpoints),
             "started": time.strftime("%Y-%m-%d %H:%M", time.localtime(j.started)) if j.started else "",
             "problem": j.last_error or j.note} for j in jobs.list_jobs()]
    st.dataframe(pd.DataFrame(rows), hide_index=True)


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f", about {int(seconds // 60)} min {int(seconds % 60)} s left" if seconds >= 60 else \
        f", about {int(seconds)} s left"


def job_panel(run_dir: str) -> None:
    """Status, progress, curves, samples and log of one job (refreshed on its own while active)."""
    job = jobs.poll(run_dir)
    curves = rf.read_curves(run_dir)
    # the run's folder name and status.json are shown as text
    st.subheader(f"{state.md_escape(job.name)}: :{COLORS.get(job.state, 'gray')}[{state.md_escape(job.state)}]")
    st.progress(job.fraction, text=f"step {job.step} of {job.total_steps or '?'}"
                + (_eta(curves.eta_seconds(job.total_steps)) if job.active else ""))
    if job.state == "failed":
        st.error(f"The job failed: {state.md_escape(job.last_error or 'no error recorded')}")
    elif job.state == "stopped":
        st.warning(f"Stopped at step {job.step}. " + (f"({state.md_escape(job.note)}) " if job.note else "")
                   + ("Resume continues from its last checkpoint." if job.resumable
                      else "No checkpoint to resume from."))
    elif job.state == "unknown":
        st.warning(f"This run directory looks damaged or incomplete: {state.md_escape(job.note or 'no status')}.")
    c1, c2, _ = st.columns([1, 1, 4])
    if job.active and c1.button("Stop", key="tr_stop"):
        with st.spinner("Asking the trainer to save and stop…"):
            state.friendly(launch.stop, run_dir, what="Stopping")
            jobs.wait(run_dir, timeout=10)
        st.rerun(scope="app")
    if job.resumable and c2.button("Resume", key="tr_resume"):
        try:
            launch.resume(run_dir)
            st.rerun(scope="app")
        except jobs.JobError as err:
            st.error(f"Not resumed: {state.md_escape(err)}")
    seen = st.session_state.get("tr_seen", {})
    if seen.get(run_dir) not in (None, (job.state, len(job.checkpoints))):
        state.refresh_checkpoints()                          # new checkpoint or new state: refresh the page
        seen[run_dir] = (job.state, len(job.checkpoints))
        st.session_state["tr_seen"] = seen
        st.rerun(scope="app")
    seen[run_dir] = (job.state, len(job.checkpoints))
    st.session_state["tr_seen"] = seen
    if len(curves.step) or len(curves.eval_step):
        planned = _planned(job, curves)
        downloads.chart(plots.training_figure(curves, planned), downloads.file_stem(job.name, "curves"),
                        key="tr_curves")
        if len(curves.bleu):
            note = zero_bleu_note(float(curves.bleu[-1]), float(curves.chrf[-1]),
                                  [str(s.get("ref", "")) for s in curves.samples if isinstance(s, dict)])
            if note:
                st.caption(note)
    else:
        st.caption("No metrics yet.")
    if curves.samples:
        st.markdown("**Latest sample translations (dev set)**")
        st.table(md_cells(pd.DataFrame(curves.samples)).rename(columns={"src": "source", "ref": "reference",
                                                               "hyp": "model output"}))
    with st.expander("Log (train.log)", expanded=job.state == "failed"):
        st.code(rf.log_tail(run_dir) or "(empty)", language=None)


def _planned(job: jobs.Job, curves: Curves):
    try:
        cfg = TrainConfig.from_dict(job.config)
        args.validate(cfg)                    # the trainer's limits too: a warmup of 10**400 overflows a float
    except (TypeError, ValueError):
        return None
    if not job.config:
        return None
    d_model = _d_model(cfg)
    if not d_model or not len(curves.step):
        return None
    x = curve_steps(max(job.total_steps or 0, curves.step.max()), cfg.warmup)
    return x, noam_curve(x, d_model, cfg.lr_factor, cfg.warmup)
