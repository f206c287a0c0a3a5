"""A checkpoint's display name as a user gives it (`ship --name/--run`, `convert from-hf --name`), checked
before it is written into config.json: the app lists it, and the command line and logs print it, so it
is one line of printable text of bounded length. Whitespace only, 100,000 characters, or a terminal's
escape sequences had all been written as given.
"""
from __future__ import annotations

import argparse
import unicodedata

MAX_NAME_CHARS = 100


def display_name(text: str) -> str:
    """`text` with its outer spaces trimmed; argparse.ArgumentTypeError (argparse's one-line refusal) when
    it is blank, longer than MAX_NAME_CHARS, or holds a control or format character (escapes, line
    breaks, bidirectional overrides)."""
    name = str(text).strip()
    if not name:
        raise argparse.ArgumentTypeError("a name needs at least one visible character")
    if len(name) > MAX_NAME_CHARS:
        raise argparse.ArgumentTypeError(f"a name has at most {MAX_NAME_CHARS} characters, not {len(name):,}")
    hidden = next((c for c in name if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
    if hidden is not None:
        raise argparse.ArgumentTypeError(f"a name may not hold the control character U+{ord(hidden):04X}")
    return name
