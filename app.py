"""Transformer Explorer: `streamlit run app.py` (or `make run`). A router only: each page runs with
the lecture order's "Next" link under it (webapp.lecture)."""
import streamlit as st

from webapp import lecture, process_memory, sidebar

st.set_page_config(page_title="Transformer Explorer", page_icon="🔎", layout="wide")
process_memory.tune_allocator()                  # once per server process: memory flat over a lesson

# Streamlit serves its default page at "/" only (its url_path reads ""), so /translate would say
# "Page not found": a hidden second entry for the same script answers /translate. The default one
# reserves "home" (a url_path must be unique), which therefore opens Translate too.
PAGES = [
    st.Page("webapp/pages/architecture.py", title="Architecture", url_path="architecture"),
    st.Page("webapp/pages/translate.py", title="Translate", icon="🌐", url_path="home", default=True),
    st.Page("webapp/pages/translate.py", title="Translate", icon="🌐", url_path="translate", visibility="hidden"),
    st.Page("webapp/pages/attention.py", title="Attention", url_path="attention"),
    st.Page("webapp/pages/heads.py", title="Heads", url_path="heads"),
    st.Page("webapp/pages/alignment.py", title="Alignment", url_path="alignment"),
    st.Page("webapp/pages/positions.py", title="Positional encoding", url_path="positions"),
    st.Page("webapp/pages/beam.py", title="Beam search", url_path="beam"),
    st.Page("webapp/pages/training_vs_inference.py", title="Training vs inference", url_path="training_vs_inference"),
    st.Page("webapp/pages/train.py", title="Train", url_path="train"),
    st.Page("webapp/pages/schedule.py", title="Schedule", url_path="schedule"),
    st.Page("webapp/pages/checkpoints.py", title="Checkpoints", url_path="checkpoints"),
]

navigation = st.navigation(PAGES)
sidebar.render()
lecture.run(navigation, PAGES)
