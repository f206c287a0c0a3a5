"""The shared sidebar: checkpoint picker (kept in the URL) and the device in use."""
from __future__ import annotations

import streamlit as st
import torch

from explorer.ui import state


def render() -> None:
    infos = state.available_checkpoints()
    st.sidebar.title("Transformer Explorer")
    if not infos:
        st.sidebar.error("No checkpoint found in checkpoints/ or runs/. Train one: "
                         "`python -m explorer.train --dataset numbers --preset tiny --tokenizer-type word`")
        st.session_state["checkpoint_path"] = None
        return
    paths = [str(i.path) for i in infos]
    names = [i.name for i in infos]
    wanted = state.url_get("ckpt", state.DEFAULT_CHECKPOINT)
    index = names.index(wanted) if wanted in names else 0
    if st.session_state.get("checkpoint_path") in paths and "ckpt_pick" in st.session_state:
        index = paths.index(st.session_state["checkpoint_path"])
    pick = st.sidebar.selectbox("Checkpoint", range(len(infos)), index=index, key="ckpt_pick",
                                format_func=lambda i: state.checkpoint_label(infos[i]))
    info = infos[pick]
    st.session_state["checkpoint_path"] = paths[pick]
    state.url_set(ckpt=info.name)
    if info.error:
        st.sidebar.error(f"Damaged checkpoint: {state.md_escape(info.error)}")
    else:
        train = info.meta.get("training", {})
        st.sidebar.caption(f"{info.meta.get('src_lang', '?')} → {info.meta.get('tgt_lang', '?')} · "
                           f"step {train.get('step', '?')} · {info.size_bytes / 1e6:.0f} MB on disk")
    device = "CUDA (" + torch.cuda.get_device_name(0) + ")" if torch.cuda.is_available() else "CPU"
    st.sidebar.caption(f"Device: {device}")
    st.sidebar.radio("Figure download format", ("png", "svg"), key="figure_format", horizontal=True,
                     format_func=str.upper, help="What the camera button in each figure's toolbar saves.")
