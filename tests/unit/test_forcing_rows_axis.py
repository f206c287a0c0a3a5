"""The Training vs inference rows figure keeps its heatmaps off a categorical y axis: plotly.js 4 (the one
Streamlit ships) fails on several one-row heatmaps sharing a categorical axis and draws an empty box
(tests/browser/test_figures_draw_browser.py sees it drawn; this is the quick check of the cause)."""
from __future__ import annotations

from explorer.plots.forcing import OWN_PICK, READS, SCORED, rows_figure


def test_rows_are_numbers_with_named_ticks_input_at_the_bottom():
    fig = rows_figure(["<s>", "a", "b"], ["a", "b", "</s>"], [-0.1, -2.0, -0.3], ["a", "c", "</s>"],
                      [True, False, True])
    assert [list(t.y) for t in fig.data] == [[0], [1], [2]]                 # numeric rows, bottom to top
    assert all(isinstance(v, int) for t in fig.data for v in t.y)
    axis = fig.layout.yaxis
    assert axis.type != "category" and axis.categoryarray is None
    assert list(axis.tickvals) == [0, 1, 2] and list(axis.ticktext) == [READS, SCORED, OWN_PICK]
    assert list(axis.range) == [-0.5, 2.5]
    # each output is the next position's input: one place to the right, one row down
    reads, scored, _ = fig.data
    assert list(scored.text[0])[:-1] == list(reads.text[0])[1:] and list(reads.x) == list(scored.x) == [1, 2, 3]   # from 1


def test_without_picks_two_rows():
    fig = rows_figure(["<s>", "a"], ["a", "</s>"], [-0.1, -0.2])
    assert [list(t.y) for t in fig.data] == [[0], [1]]
    assert list(fig.layout.yaxis.ticktext) == [READS, SCORED] and list(fig.layout.yaxis.range) == [-0.5, 1.5]
