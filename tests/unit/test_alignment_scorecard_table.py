"""The Alignment page's scorecard table converts to Arrow as it is: Streamlit sends a DataFrame to the
browser as an Arrow table, and a column Arrow cannot type (layer numbers mixed with "") makes Streamlit
log a traceback ("Could not convert '' ... column layer") and retype the table each time it is shown.

The rows are made by the scorecard's own row builder (explorer.studies.align.scorecard._row): a best head
(layer and head), a best layer mean (a layer, no head), the mean of all heads (neither), an attribution
row (neither; no mutual-argmax AER) and eflomal.
"""
from __future__ import annotations

import logging

import pandas as pd
import pyarrow as pa

from explorer.studies.align.gold import GoldPair
from explorer.studies.align.scorecard import Tally, _row
from webapp.views.alignment import scorecard_table


def result() -> dict:
    gold = [GoldPair(["a", "b"], ["x", "y"], frozenset({(0, 0), (1, 1)}))]
    tally = Tally(gold)
    keys = {"head": ("attention", "naive", 1, 2), "layer": ("attention", "naive", 1, None),
            "all": ("attention", "naive", None, None), "ig": ("integrated-gradients",), "eflomal": ("eflomal", "fwd")}
    for name, key in keys.items():
        tally.add_links(key, [{(0, 0), (1, 0)}])
        if name != "ig":
            tally.links[(key, "mutual")] = [{(0, 0)}]
    rows = [_row("cross-attention (naive): best head", keys["head"], tally),
            _row("cross-attention (naive): best layer mean", keys["layer"], tally),
            _row("cross-attention (naive): mean of all heads", keys["all"], tally),
            _row("integrated-gradients", keys["ig"], tally),
            _row("eflomal (fwd)", keys["eflomal"], tally)]
    return {"rows": rows}


def test_the_scorecard_table_converts_to_arrow():
    table = scorecard_table(result())
    arrow = pa.Table.from_pandas(table)                      # raised ArrowInvalid on '' in the layer column
    assert arrow.num_rows == 5
    assert list(table["layer"]) == [2, 2, pd.NA, pd.NA, pd.NA]     # shown 1-based; blank where none
    assert list(table["head"]) == [3, pd.NA, pd.NA, pd.NA, pd.NA]
    assert str(table["layer"].dtype) == "Int64" and str(table["head"].dtype) == "Int64"
    assert pa.types.is_integer(arrow.schema.field("layer").type)
    assert table["AER % (mutual argmax)"].isna().tolist() == [False, False, False, True, False]
    assert table["aligner"].tolist()[3] == "integrated gradients"


def test_streamlit_sends_it_without_retyping(caplog):
    """Streamlit's own conversion takes the table as it is: no fallback, so no traceback in the log."""
    from streamlit import dataframe_util

    with caplog.at_level(logging.DEBUG):
        data = dataframe_util.convert_pandas_df_to_arrow_bytes(scorecard_table(result()))
    assert data
    assert not [r for r in caplog.records if r.exc_info or "Arrow" in r.getMessage()], caplog.text
