"""One numbering for everything a user reads: positions, layers, heads, steps and beam ranks count
from 1 on every page, in every figure label and every download (CSV), while the library's arrays
and capture names stay 0-based (docs/DESIGN.md: "0-based in names, 1-based in the UI").

Decoder rows: a decoder position reads one token (its input, the previous output shifted right) and
writes the next. Every page labels a decoder row by the token it **writes**, with its input beside it
where there is room (the Attention page's rule: "the step that wrote 'und' looks at ..."), because
that is the token a reader asks about. position_label and decoder_row_labels are that rule, written
once for the pages; explorer.plots.attention.head_heatmap(predicts=...) draws it.
"""
from __future__ import annotations

from typing import Sequence


def position_label(index: int, token: str) -> str:
    """"3: ▁word" for the token at 0-based `index`: what axes, tables and CSV headers show."""
    return f"{index + 1}: {token}"


def position_labels(tokens: Sequence[str]) -> list[str]:
    return [position_label(i, t) for i, t in enumerate(tokens)]


def decoder_row_labels(inputs: Sequence[str], outputs: Sequence[str] | None) -> list[str]:
    """Each decoder row by the token it writes (its input in brackets), 1-based; by its input alone
    when the outputs are unknown or do not line up (a trace without them)."""
    if outputs is None or len(outputs) != len(inputs):
        return position_labels(inputs)
    return [f"{i + 1}: writes {out} (reads {inp})" for i, (inp, out) in enumerate(zip(inputs, outputs))]


def one_based_trace(frame):
    """A beam trace's table (BeamTrace.to_dataframe) as the page counts: steps, ranks and hypothesis
    slots from 1; a slot of -1 (not kept, or no parent) is left blank."""
    frame = frame.copy()
    for column in ("step", "rank"):
        frame[column] = frame[column].astype(int) + 1
    for column in ("parent", "slot"):
        if column in frame:
            frame[column] = (frame[column].astype(int) + 1).where(frame[column] >= 0).astype("Int64")
    return frame


def count(n: int, noun: str) -> str:
    """A count in words, its noun in the plural unless it is one: "1 sentence", "1,002 sentences"."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
