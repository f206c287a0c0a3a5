"""The pages' number tables as shown: a cell with no number reads "—", never Streamlit's grey "None".

Streamlit draws a missing number (None, NaN, pd.NA) as a grey "None", which reads like a value or a bug.
A column that has missing cells is shown as text here: its numbers written in the column's format, its
missing cells as EMPTY, and the column's help says what an empty cell means. A column without missing
cells stays a number column (sorting by value). The table a page downloads (CSV) is the unchanged one:
a missing number is an empty CSV cell.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

EMPTY = "—"


def _text(value, fmt: str) -> str:
    return EMPTY if value is None or pd.isna(value) else fmt % value


def shown(frame: pd.DataFrame, formats: dict[str, str], helps: dict[str, str] | None = None,
          empty: dict[str, str] | None = None) -> tuple[pd.DataFrame, dict]:
    """(the table to show, its column_config) for st.dataframe. `formats`: printf formats of the number
    columns ("%.2f", "%d"); `helps`: a column's tooltip; `empty`: what an empty cell of a column means,
    added to its help ("—: ...")."""
    helps, empty = helps or {}, empty or {}
    table, config = frame.copy(), {}
    for column in frame.columns:
        help_text = helps.get(column)
        if column in empty:
            help_text = (help_text + " " if help_text else "") + f"{EMPTY}: {empty[column]}"
        if column in formats and frame[column].isna().any():
            table[column] = [_text(v, formats[column]) for v in frame[column]]
            config[column] = st.column_config.TextColumn(help=help_text)
        elif column in formats:
            config[column] = st.column_config.NumberColumn(format=formats[column], help=help_text)
        elif help_text:
            config[column] = st.column_config.Column(help=help_text)
    return table, config
