"""The scorecard as a text table (the CLI prints it; the README quotes it)."""
from __future__ import annotations


def _pct(x) -> str:
    return "  -  " if x is None else f"{100 * x:5.1f}"


def report(result: dict) -> str:
    g = result["gold"]
    lines = [f"gold: {g['name']}: {g['pairs']} pairs ({g['sure']} sure, {g['possible']} possible-only links)"
             + (f", {len(g['skipped'])} skipped" if g["skipped"] else "")
             + (f"; {g['held_out']} of them in the checkpoint's held-out pairs" if g.get("held_out") is not None else ""),
             "", f"{'aligner':58s} {'layer':>5s} {'head':>4s} {'P %':>5s} {'R %':>5s} {'AER %':>6s} {'mutual':>6s}"]
    for row in result["rows"]:
        lines.append(f"{row['aligner'][:58]:58s} {row['layer'] or '':>5} {row['head'] or '':>4} {_pct(row['precision'])} "
                     f"{_pct(row['recall'])} {_pct(row['aer']):>6s} {_pct(row.get('aer_mutual')):>6s}")
    for row in result["rows"]:
        same = row.get("attention_same_pairs")
        if same:
            lines.append(f"{row['aligner']} is scored on the first {row['pairs']} pairs; there the best attention layer "
                         f"({same['variant']}, layer {same['layer']}) has AER {_pct(same['aer']).strip()}%")
    eflomal = result.get("eflomal", {})
    if "corpus" in eflomal:
        lines.append(f"eflomal trained on {eflomal['corpus']} ({eflomal['training_pairs']} pairs) + the gold pairs, "
                     f"{eflomal['seconds']} s")
    elif "error" in eflomal:
        lines.append(f"eflomal could not run: {eflomal['error']}")
    band = ", ".join(f"{k} {v}" for k, v in result["published_de_en"].items())
    lines.append(f"published German-English AER % (awesome-align README), for scale: {band}")
    ig = result.get("integrated_gradients", {})
    if "absolute_gap_median" in ig:
        line = (f"integrated gradients ({ig['steps']} steps, {ig['pairs']} pairs, {ig['targets']} targets): completeness "
                f"gap |sum - (F(x) - F(0))| median {ig['absolute_gap_median']:.4f} nats, max {ig['absolute_gap_max']:.3f}")
        if "relative_delta_median" in ig:
            line += (f"; relative to F(x) - F(0) (the {ig['relative_targets']} targets that move >= 0.5 nats): median "
                     f"{100 * ig['relative_delta_median']:.2f}%, 95th percentile {100 * ig['relative_delta_p95']:.2f}%, "
                     f"max {100 * ig['relative_delta_max']:.2f}%")
        lines.append(line)
    lines.append(f"{result['seconds']} s")
    return "\n".join(lines)
