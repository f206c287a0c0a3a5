"""Transformer Explorer: `streamlit run app.py` (or `make run`). A router only: each page runs with
the lecture order's "Next" link under it (webapp.lecture)."""
import streamlit as st

from webapp import lecture, presenter, process_memory, sidebar

# The sidebar starts collapsed in presenter mode: the projector's width goes to the page (webapp.presenter).
st.set_page_config(page_title="Transformer Explorer", page_icon="🔎", layout="wide",
                   initial_sidebar_state=presenter.sidebar_state())
process_memory.tune_allocator()                  # once per server process: memory flat over a lesson

PAGES = lecture.navigation_pages()               # {section: [st.Page]}, in the lecture's order
# Every page listed, always: past twelve pages Streamlit would fold the list to ten behind "View more",
# hiding the end of the lecture from a student reading the sidebar.
navigation = st.navigation(PAGES, expanded=True)
sidebar.render()
lecture.run(navigation, [page for pages in PAGES.values() for page in pages])
