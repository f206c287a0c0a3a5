"""Transformer Explorer: `streamlit run app.py` (or `make run`). A router only: each page runs with
the lecture order's "Next" link under it (webapp.lecture).

The server process's first script run imports the libraries (torch, pandas, plotly) and builds the
first page's indexes while its visitor waits for the first translation: some 270k new objects that live
as long as the process, and a few hundred that are garbage. Python's cyclic garbage collector would walk
that growing heap again and again meanwhile (4-6 full collections over the run; 0.8-1.3 s of CPU before
the Translate page's translation, on 2 busy cores), so it is paused for that one run, and what the run
left is then set aside as gc.freeze() would set it aside 5 s later anyway (webapp.process_memory, whose
tuning starts after the run, so that its first collection does not land in the middle of it). Later
runs are untouched (tests/app/test_app_cold_start.py).
"""
import gc
import sys

import streamlit as st

from webapp import process_memory                # light (ctypes): imported before the pause is decided

FIRST_RUN = "webapp.sidebar" not in sys.modules   # the app's libraries are not imported yet
paused = FIRST_RUN and gc.isenabled()
if paused:
    gc.disable()
try:
    from webapp import lecture, presenter, sidebar, state

    # The sidebar starts collapsed in presenter mode: the projector's width goes to the page (webapp.presenter).
    st.set_page_config(page_title="Transformer Explorer", page_icon="🔎", layout="wide",
                       initial_sidebar_state=presenter.sidebar_state())

    PAGES = lecture.navigation_pages()               # {section: [st.Page]}, in the lecture's order
    # Every page listed, always: past twelve pages Streamlit would fold the list to ten behind "View more",
    # hiding the end of the lecture from a student reading the sidebar.
    navigation = st.navigation(PAGES, expanded=True)
    if problem := state.runs_dir_problem():         # a server set up wrong: said on every page, not a traceback
        st.error(f"The app cannot start: {state.md_escape(problem)}.")
        st.stop()
    sidebar.render()
    lecture.run(navigation, [page for pages in PAGES.values() for page in pages])
finally:                                             # also when the page stops or reruns (Streamlit's exceptions)
    if paused:
        gc.freeze()                                  # not walked by later collections (process_memory's rule)
        gc.enable()
    process_memory.tune_allocator()                  # once per server process: memory flat over a lesson
