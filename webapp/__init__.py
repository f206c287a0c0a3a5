"""Streamlit pages and widgets. Pages are thin: widgets -> cached library calls -> figures."""
