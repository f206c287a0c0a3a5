"""The load benchmark's lesson: what each student does, what is recorded, and the goals (benchmarks/load.py)."""
from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from explorer.store.run_paths import shipped_root


CHECKPOINT = "bible-es-en"
PHASES = ("open", "translate", "attention", "head", "beam", "step")
SESSION_TTL_S = float(tomllib.loads((Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml")
                                    .read_text())["server"].get("disconnectedSessionTTL", 120))
QUEUE_NOTICE = re.compile(r"(\d+) requests? waits? before yours|yours is next")   # webapp.models' notice while waiting
GOALS = "N=16: translate p95 < 3 s, 0 errors, 0 mixed; N=32: 0 errors; RSS after 200 sessions within 20% of after 10"


# ---- the script ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    phase: str
    seq: int          # 0 for the phase's first interaction, k for its k-th switch
    arg: int          # the head (1-based) or beam step (1-based) asked for
    synced: bool      # every student starts it at the same moment


def lesson(heads: int, steps: int, n_heads: int) -> list[Step]:
    plan = [Step("open", 0, 0, True), Step("translate", 0, 0, True), Step("attention", 0, 1, True)]
    plan += [Step("head", k, k % n_heads + 1, k == 1) for k in range(1, heads + 1)]
    plan += [Step("beam", 0, 1, True)]
    plan += [Step("step", k, k + 1, k == 1) for k in range(1, steps + 1)]
    return plan


def churn_lesson() -> list[Step]:
    return [Step("open", 0, 0, False), Step("translate", 0, 0, False), Step("attention", 0, 1, False)]


@dataclass
class Record:
    student: int
    phase: str
    seq: int
    visible: float | None = None
    settled: float | None = None
    sent: float | None = None     # seconds from the action to its message leaving for the server
    error: str | None = None
    seen: Any = None              # what the student saw (comparable text, JSON-able)
    queued: int | None = None     # most requests waiting ahead in a queue notice the student was shown (protocol client)


def sentences(name: str, count: int) -> list[str]:
    """`count` distinct held-out verses of 10-30 words, in test.tsv order, skipping the showcase sentence."""
    from explorer.data.files import read_tsv
    from explorer.files.names import TEST_SPLIT

    path = shipped_root() / name
    pairs = read_tsv(str(path / TEST_SPLIT))
    try:
        showcase = json.loads((path / "card.json").read_text()).get("showcase", {}).get("index")
    except (OSError, ValueError, AttributeError):
        showcase = None
    out: list[str] = []
    for i, p in enumerate(pairs):
        if i != showcase and 10 <= len(p.src.split()) <= 30 and p.src not in out:
            out.append(p.src)
    if len(out) < count:
        out = (out * (count // max(len(out), 1) + 1))[:count]
    return out[:count]


@dataclass
class Stage:
    client: str               # protocol | browser | reference | churn
    n: int
    records: list[Record] = field(default_factory=list)
    server: dict = field(default_factory=dict)
    client_cpu_s: float = 0.0
    wall_s: float = 0.0
    note: str = ""
    memory: dict = field(default_factory=dict)
