"""NLLB-200's --analyses stage (see benchmarks.nllb): each analysis the commands run, on one short sentence of
the imported random model, beside a greedy translation of it timed in the same process."""
from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import torch


def rss_gib() -> float:
    """This process's peak resident memory in GiB (each stage runs in a process of its own)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20        # KiB on Linux


ANALYSIS_SENTENCE = "la casa es grande y la puerta está abierta"       # 12 pieces of the padded model
ANALYSIS_REFERENCE = "the house is big and the door is open"
ANALYSIS_CORRUPT = ("el casa es grande y la puerta está abierta",          # as many pieces, one word swapped
                    "la casa es grande y el puerta está abierta", "la casa es grande y la puerta es abierta")
REFUSED = {
    "grounding": "needs the model's training pairs (its index of source-target counts); an imported model has "
                 "none, and the Grounding page and `grounding` command say so",
    "features": "dictionaries are trained per site from rows of the model's training pairs (200,000 rows per site "
                "by default); an imported model has no training pairs, so the page and command refuse; the "
                "teacher-forced forward timed here is what each row costs (rows come a sentence's tokens at a time)",
    "graphs": "reads the features study's transcoders (one per FFN: 24 here), which need the training pairs "
              "above: refused with them",
}


class _Pair:
    def __init__(self, src: str, tgt: str):
        self.src, self.tgt = src, tgt


def _hand_made_pair(model, tok, clean: str, corrupt: str, given: list[int]):
    """A MinimalPair of two sources whose greedy outputs agree (as a random model's do), measured at the first
    position after the forced tag on the two tokens the sources' logits tell apart most; for timing the grids."""
    from explorer.studies.patching.pair import MinimalPair
    from explorer.text.encoding import source_ids

    ids = [source_ids(tok, text, model.cfg.max_len, model.cfg.special) for text in (clean, corrupt)]
    prefix = list(given)
    tgt_in = torch.tensor([[model.cfg.special.start, *prefix]])
    with torch.inference_mode():
        logits = [model.generator.proj(model.decode(tgt_in, model.encode(torch.tensor([s]))[0], None)[:, -1])[0]
                  for s in ids]
    diff = logits[0] - logits[1]
    clean_token, corrupt_token = int(diff.argmax()), int(diff.argmin())
    changed = [i for i, (a, b) in enumerate(zip(*ids)) if a != b]
    return MinimalPair(clean_src=ids[0], corrupt_src=ids[1], changed=changed, prefix=prefix, clean_token=clean_token,
                       corrupt_token=corrupt_token, clean_output=prefix + [clean_token],
                       corrupt_output=prefix + [corrupt_token], given=len(given))


def stage_analyses(folder: Path, args) -> dict:
    """Each analysis of ANALYSIS_SENTENCE on the imported model beside a greedy translation of it."""
    import gc

    from explorer.decoding.teacher import score_targets
    from explorer.decoding.translate import forced_target, translate
    from explorer.store.checkpoint import load_checkpoint
    from explorer.studies.align.gold import GoldPair
    from explorer.studies.align.sentence import Method, align_sentence
    from explorer.studies.common.command import bound
    from explorer.studies.common.gradients import IG_STEPS
    from explorer.studies.common.sentences import GREEDY, build_sentences
    from explorer.studies.contrastive.job import SearchSettings, run_search
    from explorer.studies.contributions.job import ContributionSettings, run_contributions
    from explorer.studies.heads.importance import HeadRemover
    from explorer.studies.heads.job import LabSettings, estimate_cost
    from explorer.studies.lens.job import LensSettings, run_lens
    from explorer.studies.patching.grids import pair_grids
    from explorer.studies.patching.job import run_patching
    from explorer.text.encoding import output_ids, source_ids

    start = time.perf_counter()
    ckpt = bound(load_checkpoint(folder / "models" / "nllb-600m"), args.src_lang, args.tgt_lang)
    model, tok = ckpt.model, ckpt.tokenizer
    loaded = time.perf_counter() - start
    given = forced_target(tok)
    sentence, pairs = ANALYSIS_SENTENCE, [_Pair(ANALYSIS_SENTENCE, ANALYSIS_REFERENCE)]
    src = source_ids(tok, sentence, model.cfg.max_len, model.cfg.special)
    seconds: dict[str, float | None] = {}
    notes: dict[str, str] = {}

    def say(name: str) -> None:
        secs = seconds.get(name)
        ratio = f" ({secs / seconds['greedy']:.1f}x greedy)" if secs is not None and seconds.get("greedy") else ""
        print(f"analysis {name}: " + (f"{secs:.1f} s{ratio}" if secs is not None else "refused") +
              (f"  {notes[name]}" if name in notes else "") + f"  [peak {rss_gib():.2f} GiB]", file=sys.stderr,
              flush=True)

    def timed(name: str, fn):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        seconds[name] = time.perf_counter() - t0
        return out

    print(f"loaded in {loaded:.1f} s; source {len(src)} ids, forced target {given}", file=sys.stderr, flush=True)
    with torch.inference_mode():
        translate(model, tok, sentence, GREEDY)                                       # warm-up
        best = timed("greedy", lambda: translate(model, tok, sentence, GREEDY)).best
    notes["greedy"] = f"{len(best.ids)} output ids, the first {best.ids[0]}"
    say("greedy")
    out = output_ids(tok, ANALYSIS_REFERENCE, model.cfg.max_len, model.cfg.special)
    with torch.inference_mode():
        own = list(best.ids[:-1] if best.finished else best.ids)
        timed("teacher-forced forward", lambda: score_targets(model, [src], [own], GREEDY, given=given))
    say("teacher-forced forward")
    if args.analyses_only:
        wanted = set(args.analyses_only.split(","))
    else:
        wanted = {"contributions", "align attention", "align grad-x-input", "align integrated-gradients", "lens",
                  "patching", "heads unit", "search"}

    if "contributions" in wanted:
        result = timed("contributions", lambda: run_contributions(model, tok, pairs,
                                                                  ContributionSettings(sentences=1, forced="output")))
        notes["contributions"] = f"ALTI+ of the model's own output, {len(result['sentences'])} sentence"
        say("contributions")
    gold = GoldPair(src=sentence.split(), tgt=ANALYSIS_REFERENCE.split(), sure=frozenset())
    for kind in ("attention", "grad-x-input"):
        name = f"align {kind}"
        if name in wanted:
            timed(name, lambda: align_sentence(model, tok, gold, [Method(kind)], ig_steps=args.ig_steps))
            notes[name] = f"one sentence's word matrix against its reference ({len(out)} target ids, tag first)"
            say(name)
    if "lens" in wanted:
        result = timed("lens", lambda: run_lens(model, tok, pairs, LensSettings(sentences=1)))
        notes["lens"] = (f"DecoderLens at {len(result['decoder_lens'])} depths, logit lens at "
                         f"{len(result['logit_lens'])} decoder layers")
        say("lens")
    gc.collect()
    if "heads unit" in wanted:
        sents = build_sentences(model, tok, pairs, 1, forced="output")
        remover = timed("heads copy", lambda: HeadRemover(model, tok, sents))
        timed("heads baseline", lambda: remover.texts([]))
        say("heads baseline")
        head = ("decoder", model.cfg.n_decoder_layers - 1, 0)                         # the last decoder layer's first
        timed("heads unit", lambda: remover.texts([head]))
        cost = estimate_cost(model, LabSettings(), 200)
        unit = seconds["heads unit"]
        seconds["heads lab (defaults, 200 sentences) estimate"] = unit * cost.decodes * 200
        notes["heads unit"] = (f"one head's removal {head} on the sentence (checked {remover.checked}, decoded again "
                               f"{remover.redecoded}); the defaults: {cost.text()}")
        notes["heads lab (defaults, 200 sentences) estimate"] = (
            f"{cost.decodes} decodes x 200 sentences x the unit: an upper bound (the lab decodes in batches, which "
            f"read the weights once), {unit * cost.decodes * 200 / 86400:.1f} days")
        say("heads unit")
        say("heads lab (defaults, 200 sentences) estimate")
        del remover
        gc.collect()
    if "search" in wanted:
        beams = tuple(int(b) for b in args.search_beams.split(","))
        result = timed("search", lambda: run_search(model, tok, pairs, SearchSettings(
            beams=beams, sentences=1, penalties=("none",), exact=True, exact_seconds=args.exact_seconds)))
        rows = {r["beam"]: r["seconds"] for r in result["beam_curve"]}
        exact = result["exact"][0] if result["exact"] else {}
        notes["search"] = (f"beam-size curve {beams}, no length penalty, seconds per beam {rows}; exact search "
                           f"within {args.exact_seconds} s: proven {exact.get('proven')}, "
                           f"{exact.get('nodes', exact.get('expanded'))} nodes")
        say("search")
    if "align integrated-gradients" in wanted:                 # last but one: the dearest per step
        name = "align integrated-gradients"
        timed(name, lambda: align_sentence(model, tok, gold, [Method("integrated-gradients")], ig_steps=args.ig_steps))
        notes[name] = f"{args.ig_steps} steps (the default: {IG_STEPS}; time grows with the steps)"
        say(name)
    if "patching" in wanted:
        refusals = []
        for corrupt in ANALYSIS_CORRUPT:
            t0 = time.perf_counter()
            try:
                result = timed("patching", lambda: run_patching(model, tok, [(sentence, corrupt)]))
            except ValueError as err:
                refusals.append(f"{corrupt!r}: {err} ({time.perf_counter() - t0:.1f} s)")
                seconds["patching"] = None
                continue
            notes["patching"] = f"clean {sentence!r}, corrupt {corrupt!r}: grids {', '.join(result['grids'])}"
            break
        if refusals:
            notes["patching"] = "; ".join(refusals) + ("; " + notes["patching"] if "patching" in notes else "")
        say("patching")
        if seconds["patching"] is None:        # a random model's outputs may not depend on the word: the grids' cost
            pair = _hand_made_pair(model, tok, sentence, ANALYSIS_CORRUPT[0], given)
            name = "patching grids (hand-made pair)"
            result = timed(name, lambda: pair_grids(model, pair))
            notes[name] = (f"pair_grids on {sentence!r} / {ANALYSIS_CORRUPT[0]!r} with the two tokens measured after "
                           f"the tag chosen by hand (the clean run's most, the corrupted run's least favoured by the "
                           f"logit difference): the grids' numbers mean nothing, their cost is the page's; "
                           f"{sum(g['denoise'].size for g in result.grids.values())} cells x 2 directions")
            say(name)
    for name, why in REFUSED.items():
        seconds[name], notes[name] = None, why
        say(name)
    greedy = seconds["greedy"]
    return {"load_s": loaded, "seconds": seconds, "ratio_to_greedy": {k: (v / greedy if v is not None else None)
                                                                      for k, v in seconds.items()},
            "notes": notes, "source_ids": len(src), "output_ids": len(best.ids), "forced_target": given,
            "peak_rss_gib": rss_gib()}
