"""Token labels that try to break out of bertviz's HTML, and random attention stacks over them: the
inputs of the offline bertviz tests (tests/app) and of the same views in a browser (tests/browser)."""
from __future__ import annotations

import numpy as np

HOSTILE = ["<img src=x onerror=\"window.PWNED=1\">", "</script><script>window.PWNED=2</script>", "&amp;", "▁ok", "</s>"]
TGT = ["<s>", "▁\"quoted\"", "▁it's", "▁<b>"]


def stacks(layers=2, heads=3, src=len(HOSTILE), tgt=len(TGT), seed=0):
    """Row-stochastic attention [L, H, q, k] for each kind, seeded."""
    rng = np.random.default_rng(seed)

    def soft(*shape):
        x = rng.random(shape)
        return (x / x.sum(-1, keepdims=True)).astype(np.float32)

    return {"encoder": soft(layers, heads, src, src), "decoder": soft(layers, heads, tgt, tgt),
            "cross": soft(layers, heads, tgt, src)}
