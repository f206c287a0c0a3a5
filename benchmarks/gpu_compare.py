"""Comparing two results of one analysis, the CPU's and the device's: every number within a tolerance,
everything else (texts, counts, labels, flags, keys, lengths) equal.

Why a walk over the JSON and not a list of chosen fields: each analysis's run function returns the
JSON its command writes, so comparing the whole of it (timings left out: explorer.runtime.clock's
TIMING_KEYS) checks everything a user would read, and a field added to an analysis later is compared
without anyone remembering to. A comparison that compared nothing is no pass.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from explorer.runtime.clock import TIMING_KEYS

SHOWN = 3                     # mismatching paths kept in the result


@dataclass(frozen=True)
class Tolerance:
    """|other - cpu| <= atol + rtol x |cpu| for every number; `why` says why the bound holds."""
    atol: float
    rtol: float
    why: str
    keys: tuple = ()              # ((key, atol), ...): a wider absolute bound for numbers under that key

    def allows(self, cpu: float, other: float, key: str = "") -> bool:
        atol = dict(self.keys).get(key, self.atol)
        return abs(cpu - other) <= atol + self.rtol * abs(cpu)


@dataclass
class Comparison:
    """What a comparison found: how many numbers and other values it compared, the largest difference
    of numbers and where, and the paths of those outside the tolerance or unequal."""
    numbers: int = 0                  # floats compared
    worst: float = 0.0                # largest |a - b| among them
    worst_path: str = ""
    outside: list = dataclasses.field(default_factory=list)      # floats beyond the tolerance (paths)
    unequal: list = dataclasses.field(default_factory=list)      # texts, counts, labels that differ (paths)
    others: int = 0                   # texts, counts, labels, flags compared

    @property
    def ok(self) -> bool:
        return not self.outside and not self.unequal and self.numbers + self.others > 0

    def as_dict(self) -> dict:
        return {"ok": self.ok, "numbers_compared": self.numbers, "others_compared": self.others,
                "max_abs_diff": self.worst, "max_abs_diff_at": self.worst_path,
                "outside_tolerance": len(self.outside), "outside_examples": self.outside[:SHOWN],
                "unequal": len(self.unequal), "unequal_examples": self.unequal[:SHOWN]}


def compare_results(a, b, tolerance: Tolerance, skip: tuple[str, ...] = TIMING_KEYS) -> Comparison:
    """Walk two JSON-like results side by side: floats within `tolerance`, everything else equal; keys
    in `skip` (timings: how it ran, not what it found) left out at every depth."""
    found = Comparison()
    _walk(a, b, "", tolerance, skip, found)
    return found


def _walk(a, b, path: str, tolerance: Tolerance, skip, found: Comparison) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            found.others += 1
            found.unequal.append(f"{path or '/'}: keys {sorted(set(a) ^ set(b))[:5]}")
        for key in a.keys() & b.keys():
            if key not in skip:
                _walk(a[key], b[key], f"{path}/{key}", tolerance, skip, found)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            found.others += 1
            found.unequal.append(f"{path}: {len(a)} items against {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _walk(x, y, f"{path}/{i}", tolerance, skip, found)
    elif _is_float(a) or _is_float(b):
        if not (_is_number(a) and _is_number(b)):
            found.others += 1
            found.unequal.append(f"{path}: {a!r} against {b!r}")
            return
        found.numbers += 1
        x, y = float(a), float(b)
        if math.isnan(x) or math.isnan(y):
            if not (math.isnan(x) and math.isnan(y)):
                found.outside.append(f"{path}: {x!r} against {y!r}")
            return
        diff = abs(x - y) if x != y else 0.0
        if diff > found.worst:
            found.worst, found.worst_path = diff, path
        if not tolerance.allows(x, y, path.rsplit("/", 1)[-1]):
            found.outside.append(f"{path}: {x!r} against {y!r}")
    else:
        found.others += 1
        if a != b:
            found.unequal.append(f"{path}: {_short(a)} against {_short(b)}")


def _is_float(x) -> bool:
    return isinstance(x, float)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _short(x) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."
