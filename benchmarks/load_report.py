"""The load benchmark's report: latency per phase, outputs against each student's reference, server CPU
and memory, printed as tables (and returned for --json)."""
from __future__ import annotations

import json
import os
from dataclasses import asdict
from typing import Any

from benchmarks.load_lesson import GOALS, PHASES, SESSION_TTL_S, Stage


# ---- report --------------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between the closest ranks."""
    values = sorted(values)
    if len(values) == 1:
        return values[0]
    pos = q * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def reference_table(reference: Stage) -> dict[tuple[int, str, int], str]:
    return {(r.student, r.phase, r.seq): _key(r.seen) for r in reference.records if r.error is None}


def _key(seen: Any) -> str:
    return json.dumps(seen, ensure_ascii=False, sort_keys=True)


def compare(stage: Stage, ref: dict) -> dict:
    """Outputs that differ from the student's own single-user reference, and of those, how many are
    another student's (mixed)."""
    by_step: dict[tuple[str, int], dict[str, int]] = {}
    for (student, phase, seq), key in ref.items():
        by_step.setdefault((phase, seq), {})[key] = student
    differ, mixed, unchecked, examples = 0, 0, 0, []
    for r in stage.records:
        if r.error is not None:
            continue
        want = ref.get((r.student, r.phase, r.seq))
        if want is None:
            unchecked += 1
            continue
        got = _key(r.seen)
        if got != want:
            differ += 1
            owner = by_step.get((r.phase, r.seq), {}).get(got)
            if owner is not None and owner != r.student and r.phase != "open":
                mixed += 1
            if len(examples) < 3:
                examples.append({"student": r.student, "phase": r.phase, "seq": r.seq, "saw": r.seen,
                                 "own_reference": json.loads(want), "is_student": owner})
    return {"differ": differ, "mixed": mixed, "unchecked": unchecked, "examples": examples}


def phase_stats(stage: Stage) -> dict[str, dict]:
    out = {}
    for phase in PHASES:
        rows = [r for r in stage.records if r.phase == phase]
        ok = [r.visible for r in rows if r.error is None and r.visible is not None]
        from_send = [r.visible - r.sent for r in rows
                     if r.error is None and r.visible is not None and r.sent is not None]
        settled = [r.settled for r in rows if r.error is None and r.settled is not None]
        errors = [r for r in rows if r.error is not None and not r.error.startswith("not run")]
        out[phase] = {"count": len(rows), "ok": len(ok), "errors": len(errors),
                      "not_run": sum(1 for r in rows if r.error and r.error.startswith("not run")),
                      "p50": pct(ok, 0.5) if ok else None, "p95": pct(ok, 0.95) if ok else None,
                      "max": max(ok) if ok else None,
                      "from_send_p50": pct(from_send, 0.5) if from_send else None,
                      "settled_p50": pct(settled, 0.5) if settled else None,
                      "settled_p95": pct(settled, 0.95) if settled else None,
                      "first_error": errors[0].error if errors else None}
    return out


def comparison(stages: list[Stage], ref: dict) -> None:
    """Each browser stage next to the protocol stage (or the reference) with the same N."""
    by = {(s.client, s.n): s for s in stages}
    for (client, n), b in by.items():
        if client != "browser":
            continue
        p = by.get(("protocol", n)) or (by.get(("reference", 1)) if n == 1 else None)
        if p is None:
            continue
        bs, ps = phase_stats(b), phase_stats(p)
        pname = "reference (one at a time)" if p.client == "reference" else "protocol"
        students_p = max(len({r.student for r in p.records}), 1)
        print(f"browser vs {pname} at N={n}, p50 s: protocol arrived (from its message sent) | browser drawn "
              "from its message sent | browser drawn from the user's action")
        for phase in PHASES:
            print(f"    {phase:9s} {fmt_s(ps[phase]['from_send_p50']):>5s} | {fmt_s(bs[phase]['from_send_p50']):>5s} | "
                  f"{fmt_s(bs[phase]['p50']):>5s}")
        cmp = compare(b, ref)
        print(f"    server CPU per student: protocol {p.server['cpu_s'] / students_p:.2f} s, browser "
              f"{b.server['cpu_s'] / max(n, 1):.2f} s; browser outputs differing from the protocol reference: "
              f"{cmp['differ']} of {sum(1 for r in b.records if r.error is None)}; client CPU: protocol "
              f"{p.client_cpu_s:.1f} s, browser {b.client_cpu_s:.1f} s")


def fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def report(stages: list[Stage], ref: dict, args, load: tuple) -> dict:
    print(f"\ncheckpoint {args.checkpoint}; {args.heads} head switches and {args.steps} beam steps per student, "
          f"think {args.think:g} s; {os.cpu_count()} CPUs, load average {load[0]:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after (a shared machine: other work ran too)")
    print("latency per interaction, seconds until the student sees it (p50 / p95 / max); protocol = element "
          "arrived over the websocket, browser = drawn")
    head = f"{'client':9s} {'N':>3s} " + " ".join(f"{p:>17s}" for p in PHASES)
    head += (f" {'errors':>6s} {'differ':>6s} {'mixed':>5s} {'srv CPU s':>9s} {'peak cores':>10s} {'RSS peak':>8s}"
             f" {'wall s':>6s}")
    print(head)
    out = {"args": vars(args), "load_before": load, "load_after": os.getloadavg(), "stages": []}
    for stage in stages:
        if stage.client == "churn":
            continue
        stats = phase_stats(stage)
        cmp = compare(stage, ref) if stage.client != "reference" else {"differ": 0, "mixed": 0, "unchecked": 0,
                                                                         "examples": []}
        errors = sum(s["errors"] for s in stats.values())
        not_run = sum(s["not_run"] for s in stats.values())
        cells = " ".join(f"{fmt_s(stats[p]['p50']):>5s}/{fmt_s(stats[p]['p95']):>5s}/{fmt_s(stats[p]['max']):>5s}"
                         for p in PHASES)
        ref_mark = "ref" if stage.client == "reference" else str(cmp["differ"])
        srv = stage.server
        print(f"{stage.client:9s} {stage.n:3d} {cells} {errors:6d} {ref_mark:>6s} "
              f"{cmp['mixed'] if stage.client != 'reference' else '-':>5} {srv['cpu_s']:9.1f} "
              f"{srv['peak_cores']:10.2f} "
              f"{srv['rss_peak_mb']:7.0f}M {stage.wall_s:6.1f}")
        for phase, s in stats.items():
            if s["first_error"]:
                print(f"    {phase}: {s['errors']} error(s), e.g. {s['first_error'][:160]}")
        if not_run:
            print(f"    {not_run} interaction(s) not run (time bound or broken session)")
        for ex in cmp["examples"]:
            print(f"    differs: {json.dumps(ex, ensure_ascii=False)[:400]}")
        if stage.note:
            print(f"    note: {stage.note}")
        queued = [r.queued for r in stage.records if r.queued is not None]
        if stage.client != "browser":
            print(f"    queue notices: {len(queued)} interaction(s) of {len({r.student for r in stage.records if r.queued is not None})} "
                  f"student(s) were told they wait" + (f" (at most {max(queued)} waiting before theirs)" if queued else ""))
        students = max(stage.n if stage.client != "reference" else len({r.student for r in stage.records}), 1)
        main_share = srv['main_thread_cpu_s'] / max(srv['cpu_s'], 1e-9)
        print(f"    server CPU {srv['cpu_s'] / students:.2f} s per student ({main_share:.0%} "
              f"in its main thread, the event loop); client CPU {stage.client_cpu_s:.1f} s "
              f"({'this process + Chromium' if stage.client == 'browser' else 'this process'}); "
              f"settled p95: " + ", ".join(f"{p} {fmt_s(stats[p]['settled_p95'])}" for p in PHASES))
        out["stages"].append({**asdict(stage), "stats": stats, "compare": cmp})
    for stage in stages:
        if stage.client == "churn":
            m, srv = stage.memory, stage.server
            errors = sum(1 for r in stage.records if r.error and not r.error.startswith("not run"))
            print(f"memory: {m.get('sessions_done')} sessions came and went ({args.churn_concurrency} at a time: "
                  f"open, translate its own sentence, Attention, leave; {errors} errors; {stage.wall_s:.0f} s, server "
                  f"CPU {srv['cpu_s']:.0f} s): RSS after the warm-up {m.get('after_warm_up_mb', 0):.0f} MB; "
                  f"peak {srv['rss_peak_mb']:.0f} MB")
            for key, label in (("curve", f"{args.settle:g} s after closing (closed sessions still kept)"),
                               ("past_ttl", f"past the {SESSION_TTL_S:g} s session TTL (closed sessions freed)")):
                curve = dict(m[key])
                if not curve:
                    continue
                after10, after_all = curve.get(10), curve.get(m.get("sessions_done"))
                ratio = f"{after_all / after10:.2f}x of after 10" if after10 and after_all else "-"
                print(f"  {label}: " + ", ".join(f"{k}: {v:.0f} MB" for k, v in m[key]) + f" ({ratio})")
            out["stages"].append({**asdict(stage), "errors": errors})
    comparison(stages, ref)
    print(f"goals (measured later, not here): {GOALS}")
    return out
