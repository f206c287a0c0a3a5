"""Plain-text tables of a head-lab result (the JSON of explorer.studies.heads.job), for the command line.

Per kind: layer x head grids of confidence (Voita et al. 2019) and normalised importance (Michel et
al. 2019); the role of each head with the rule and figure behind it; the single-head removal drops;
the pruning curves, importance order next to the mean of the random orders. Layers and heads are
1-based, as in the app.
"""
from __future__ import annotations

import numpy as np

from explorer.inspection.trace import KINDS


def grid(rows: list[dict], kind: str, field: str, fmt: str = "{:5.2f}") -> list[str]:
    """A layer x head grid of one field of the rows of one kind."""
    mine = [r for r in rows if r["kind"] == kind]
    n_layers, n_heads = max(r["layer"] for r in mine), max(r["head"] for r in mine)
    cells = {(r["layer"], r["head"]): r[field] for r in mine}
    lines = ["      " + " ".join(f"   h{h}" for h in range(1, n_heads + 1))]
    for layer in range(1, n_layers + 1):
        values = [cells[(layer, h)] for h in range(1, n_heads + 1)]
        lines.append(f"  L{layer}  " + " ".join("  nan" if v is None else fmt.format(v) for v in values))
    return lines


def report(result: dict) -> str:
    s = result["settings"]
    out = [f"head lab: {s['checkpoint']} ({s['weights_sha256'][:12]}), {s['sentences']} sentences, "
           f"forced on the {s['forced']}, {s['seeds']} random seeds; rare tokens counted in {result['rare_frequencies']}"]
    for kind in KINDS:
        out += ["", f"== {kind}: confidence (mean max weight) ==", *grid(result["stats"], kind, "confidence"),
                f"== {kind}: importance (Michel et al., l2-normalised per layer) ==",
                *grid(result["importance"], kind, "normalized")]
    out += ["", "== roles (rule: figure) =="]
    for r in result["roles"]:
        extra = "; also " + ", ".join(o["role"] for o in r["others"]) if r["others"] else ""
        why = f"{r['rule']}: {r['value']:.2f}" if r["rule"] else ""
        out.append(f"  {r['kind']:8s} L{r['layer']} h{r['head']}  {r['role']:22s} {why}{extra}")
    full = result["pruning"]["full"]
    rows = result["single_head_removal"]
    decoded = all(r["bleu_drop"] is not None for r in rows)
    out += ["", f"== single-head removal, scored by {result.get('single_removal', 'bleu (exact)')} (full model: "
                f"BLEU {full['bleu']:.2f}, chrF {full['chrf']:.2f}) ==",
            "  kind     L  h   BLEU drop  chrF drop  loss rise"]
    for r in sorted(rows, key=lambda r: -(r["bleu_drop"] if decoded else r["loss_rise"])):
        drops = "  ".join(f"{r[k]:9.2f}" if r[k] is not None else f"{'-':>9}" for k in ("bleu_drop", "chrf_drop"))
        out.append(f"  {r['kind']:8s} {r['layer']}  {r['head']}   {drops}  {r['loss_rise']:9.4f}")
    agreement = loss_rank_agreement(rows)
    if agreement is not None:
        out.append(f"  loss rise vs BLEU drop, Spearman rank correlation over {len(rows)} heads: {agreement:.3f} "
                   "(how well --single-removal loss would rank these heads)")
    curves = result["pruning"]["curves"]
    seeded = any(c["order"] == "random" for c in curves)     # --seeds 0: no random order to set beside it
    out += ["", "== pruning curves: BLEU after removing n heads (importance order"
            + (" | mean of random orders) ==" if seeded else "; --seeds 0: no random orders) ==")]
    for scope in dict.fromkeys(c["scope"] for c in curves):
        imp = next(c for c in curves if c["scope"] == scope and c["order"] == "importance")
        rnd = [c["bleu"] for c in curves if c["scope"] == scope and c["order"] == "random"]
        means = [f"|{m:.1f}" for m in np.mean(rnd, axis=0)] if rnd else [""] * len(imp["bleu"])
        cells = "  ".join(f"{n}:{b:.1f}{m}" for n, b, m in zip(imp["removed"], imp["bleu"], means))
        out.append(f"  {scope:8s} {cells}")
    out.append("  heads removable within 1 BLEU (importance order): " + ", ".join(
        f"{k} {v}/{len(next(c for c in curves if c['scope'] == k)['heads'])}"
        for k, v in result["pruning"]["removable_within_1_bleu"].items()))
    out.append(f"  {result['pruning']['decodes']} decodes, {result['seconds']} s")
    return "\n".join(out)


def loss_rank_agreement(rows: list[dict]) -> float | None:
    """Spearman's rank correlation between the heads' loss rise and their BLEU drop (ties share their
    mean rank): how well scoring removals by the loss alone ranks heads as decoding them does. None
    without decoded drops, or when either is constant (no ranking to compare)."""
    import pandas as pd

    pairs = pd.DataFrame([(r["loss_rise"], r["bleu_drop"]) for r in rows if r.get("bleu_drop") is not None
                          and r.get("loss_rise") is not None], columns=["loss", "bleu"])
    if len(pairs) < 2 or pairs["loss"].nunique() < 2 or pairs["bleu"].nunique() < 2:
        return None
    return float(pairs.corr(method="spearman").loc["loss", "bleu"])
