"""Hostile or unlucky checkpoint configs, shared by the unit and app tests, and the probe that lists and
loads a checkpoint in a fresh process to measure what that costs."""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from support.waiting import run_watched

ROOT = Path(__file__).resolve().parents[2]

# config.json "model" overrides a hostile or unlucky directory may hold
ABSURD = {
    "huge d_model": dict(d_model=2147483648, n_heads=1),
    "huge max_len": dict(max_len=50_000_000),
    "max_len as a float": dict(max_len=5e7),
    "large dims, tiny weights": dict(d_model=16384, d_ff=65536, n_heads=16),
    "large vocabulary": dict(src_vocab_size=1_000_000, tgt_vocab_size=1_000_000),
    "many layers": dict(n_encoder_layers=128, n_decoder_layers=128),
    "negative": dict(d_ff=-5),
    "boolean": dict(n_heads=True),
    "string": dict(d_model="256"),
    "nan dropout": dict(dropout=float("nan")),
}


PROBE = textwrap.dedent("""
    import json, resource, sys, time
    sys.path.insert(0, {tests!r})
    from support import model_helpers
    from explorer.store import checkpoint
    checkpoint._tokenizer_loader = lambda: model_helpers.FakeTokenizer.load
    from explorer.store.checkpoint import CheckpointError, load_checkpoint
    from explorer.store.catalog import list_checkpoints
    t0 = time.perf_counter()
    infos = list_checkpoints(sys.argv[1])
    try:
        load_checkpoint(infos[0].path)
        loaded = "loaded"
    except CheckpointError as err:
        loaded = str(err)
    print(json.dumps({{"error": infos[0].error, "load": loaded, "seconds": time.perf_counter() - t0,
                      "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}}))
""")


def probe(root: Path) -> dict:
    """List `root` and load its first checkpoint in a fresh process: the listing's error, the load's
    outcome, the seconds both took and the process's peak resident memory (ru_maxrss, which a child
    starts from its parent's over exec: compare probes with each other, not with zero)."""
    out = run_watched([sys.executable, "-c", PROBE.format(tests=str(ROOT / "tests")), str(root)],
                      "the listing and loading probe", cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
