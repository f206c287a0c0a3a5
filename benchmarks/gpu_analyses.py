"""The GPU check's analysis stages: each test-set analysis of the app run at base size on the device,
its time per sentence, and its result on a small slice equal to the CPU's within a stated tolerance.

The analyses (head lab, alignment scorecard, contributions with their faithfulness check, the two
lenses, the search curve with exact search) take hours at base size on a laptop's CPU; a GPU is what
the model card promises for them. Each stage calls the analysis's own run function (explorer.*.job,
the command's code path: nothing is reimplemented here) three times:
1. on the CPU, on a slice of a few sentences;
2. on the device, on the same slice with the same settings: the result is compared with the CPU's
   (compare_results: every number within the analysis's tolerance, every text, count and label equal),
   and the run warms the device up;
3. on the device, on more sentences (a full batch), timed: seconds per sentence (or gold pair).

The model is random (weights seeded) at the size of the models users open: base, 6+6 layers x 8 heads,
d_model 512, a 58,101-piece vocabulary and Marian's options (benchmarks/fixtures.py, the
checkpoint benchmarks/analyses.py measures on the CPU), read through the project's own loader; the
sentences are the Bible test verses and the Bible gold alignments. Random weights cost what trained
ones cost per step, except that a random model's greedy and beam outputs run to the length limit
(1.5 x source + 10), so decoding-heavy figures are upper bounds. --tiny: a random `tiny` model with the
Bible model's tokenizer, a sentence or two, so the stages run on a CPU in CI in seconds.

Why the tolerances hold: the device runs in float32 with TF32 off (benchmarks/gpu.py), the CPU in
float32; the two differ only in the order their sums are taken, so each differs from the exact result
by float32 rounding, and from each other by about twice that. TOLERANCES gives each analysis an
absolute and a relative bound well above what a relative 1e-6 change of every weight (float32
rounding's size) moved its numbers on a CPU (`python -m benchmarks.gpu_analyses --perturb 1e-6`), and
says why. A decision taken on numbers (a greedy token, a head's role, an alignment link) must be
equal: it differs only where the numbers compared lie within rounding of each other, which that
measurement never met; a mismatch is reported with its path.
"""
from __future__ import annotations

import copy
import dataclasses
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from benchmarks.gpu_compare import SHOWN, Tolerance, compare_results
from explorer.files.places import REPO_ROOT

BIBLE = REPO_ROOT / "checkpoints" / "bible-es-en"
GOLD = REPO_ROOT / "gold" / "bible-es-en.align"

# (atol, rtol) per analysis: |device - cpu| <= atol + rtol x |cpu| for every number. What float32 rounding
# does to each was measured on a CPU at base size by changing every weight by a relative 1e-6 (about
# float32's rounding; `python -m benchmarks.gpu_analyses --perturb 1e-6`): the largest move is named in
# each reason, and no decoded token, label, link or count changed.
TOLERANCES = {
    "heads": Tolerance(1e-4, 1e-3, "attention statistics are means of softmax weights (in [0, 1]) and entropies "
                                   "(at most ln 512); losses are ~ln 58,101 = 11 nats; importances are normalised "
                                   "per layer: the 1e-6 weight change moved none by more than 8e-6"),
    "align": Tolerance(1e-4, 1e-3, "AER, precision and recall are ratios of link counts, exact when the links are "
                                   "equal; integrated gradients' convergence gaps moved by 1.4e-6 at most"),
    "contributions": Tolerance(1e-4, 1e-3, "ALTI+ shares (in [0, 1]) and log-probs are written to 5 decimals, so "
                                           "two values either side of a rounding boundary differ by 1e-5, the most "
                                           "seen; faithfulness measures are differences of such log-probs"),
    "lens": Tolerance(2e-4, 1e-3, "BLEU and chrF come from the decoded texts (exact when they are equal) and are "
                                  "kept to 4 decimals (1e-4 apart across a rounding boundary); final_rank is a mean "
                                  "of integer ranks among 58,101 pieces, and at an early layer many logits lie "
                                  "within rounding of the token's, so one position's rank moves by 1 (1/positions "
                                  "in the mean: 0.038 seen); 0.1 allows two such moves in the slice",
                      keys=(("final_rank", 0.1),)),
    "search": Tolerance(2e-4, 1e-3, "sentence scores are sums of up to ~70 log-probs of ~11 nats (2.1e-4 seen, "
                                    "well inside 1e-3 relative); the curve's means are kept to 4 decimals (1e-4 "
                                    "apart across a rounding boundary)"),
}


@dataclass
class Subject:
    """What the analyses run on: one model on the CPU and a copy on the device, its tokenizer, the
    held-out pairs and the gold alignments."""
    cpu: torch.nn.Module
    device: torch.nn.Module
    tokenizer: Any
    pairs: list
    gold: list
    label: str
    build_seconds: float


def subject(run) -> Subject:
    """The run's analysis model, built once and shared by the stages (run.shared)."""
    if "analysis subject" not in run.shared:
        run.shared["analysis subject"] = build_subject(run.device, run.tiny)
    return run.shared["analysis subject"]


def build_subject(device: torch.device, tiny: bool) -> Subject:
    from explorer.studies.align.gold import read_gold
    from explorer.studies.common.command import checkpoint_and_held_out

    start = time.perf_counter()
    if tiny:
        loaded = checkpoint_and_held_out(str(BIBLE), "cpu")
        from explorer.config import PRESETS
        from explorer.model import Transformer

        ckpt, pairs = loaded
        torch.manual_seed(0)
        model = Transformer(dataclasses.replace(ckpt.config, **PRESETS["tiny"])).eval()
        label = f"tiny, random weights, {ckpt.config.tgt_vocab_size:,}-piece vocabulary"
        tokenizer = ckpt.tokenizer
    else:
        from benchmarks.analyses import build_base

        with tempfile.TemporaryDirectory(prefix="gpu-check-base-") as folder:
            loaded = checkpoint_and_held_out(str(build_base(Path(folder))), "cpu")
        if loaded is None:
            raise RuntimeError("the random base-size checkpoint could not be read back")
        ckpt, pairs = loaded
        model, tokenizer = ckpt.model.float().eval(), ckpt.tokenizer
        label = f"base, random weights, {ckpt.config.tgt_vocab_size:,}-piece vocabulary"
    dev = copy.deepcopy(model).to(device).eval()
    return Subject(model, dev, tokenizer, list(pairs), read_gold(GOLD), label, time.perf_counter() - start)


# ---- comparing two results --------------------------------------------------------------------------

# ---- the analyses, each through its own run function ------------------------------------------------

@dataclass(frozen=True)
class Analysis:
    """One analysis: `run(model, subject, size)` runs it through its own run function at one of SIZES,
    `count(size)` says on how many sentences (or gold pairs: `unit`); `timed` says the timed run's
    settings in words."""
    name: str
    stage: str
    unit: str
    run: Callable[[torch.nn.Module, "Subject", str], dict]
    counts: dict
    timed: str

    def count(self, size: str) -> int:
        return self.counts[size]


# "slice": what the device and the CPU both run, compared; "timed": what the device runs, timed; "tiny":
# both, at --tiny (a CPU in CI: every setting at its smallest that still takes each code path).
SIZES = ("tiny", "slice", "timed")


def _heads(model, s: Subject, size: str) -> dict:
    from explorer.studies.heads.job import LabSettings, run_head_lab

    # The slice scores single removals by their teacher-forced loss (one pass each): decoding 144
    # removals of even one sentence takes minutes on a CPU at this vocabulary. Its pruning curves still
    # decode with heads removed. The timed run keeps the defaults (every removal decoded; 3 seeds, 3 points).
    settings = {"tiny": LabSettings(sentences=1, seeds=0, points=1, single_removal="loss"),
                "slice": LabSettings(sentences=1, seeds=0, points=1, single_removal="loss"),
                "timed": LabSettings(sentences=16)}[size]
    return run_head_lab(model, s.tokenizer, s.pairs, settings)


def _align(model, s: Subject, size: str) -> dict:
    from explorer.studies.align.scorecard import AlignSettings, run_scorecard

    # eflomal is left out: it runs on the CPU whatever the model's device, and does not grow with the model.
    settings = {"tiny": AlignSettings(pairs=1, attribution_pairs=1, ig_steps=4, eflomal=False),
                "slice": AlignSettings(pairs=2, attribution_pairs=1, ig_steps=4, eflomal=False),
                "timed": AlignSettings(pairs=16, attribution_pairs=16, eflomal=False)}[size]
    return run_scorecard(model, s.tokenizer, s.gold, settings)


FAITHFULNESS_SENTENCES = {"tiny": 1, "slice": 1, "timed": 8}


def _contributions(model, s: Subject, size: str) -> dict:
    from explorer.studies.contributions.faithfulness import FaithfulnessSettings, run_faithfulness
    from explorer.studies.contributions.job import ContributionSettings, run_contributions

    alti = run_contributions(model, s.tokenizer, s.pairs, ContributionSettings(sentences=CONTRIBUTIONS.count(size)))
    # The compared runs erase for fewer rankings and one fraction: every ranking x fraction x output token
    # is a source scored again, minutes of a CPU at base size for the defaults' 9 rankings x 3 fractions.
    # Integrated gradients' code path is compared in the alignment stage.
    faithful = (FaithfulnessSettings(methods=("alti", "value-norm", "grad-x-input"), fractions=(0.5,), seeds=1)
                if size != "timed" else FaithfulnessSettings())
    return {"contributions": alti,
            "faithfulness": run_faithfulness(model, s.tokenizer, s.pairs, FAITHFULNESS_SENTENCES[size], faithful)}


def _lens(model, s: Subject, size: str) -> dict:
    from explorer.studies.lens.job import LensSettings, run_lens

    return run_lens(model, s.tokenizer, s.pairs, LensSettings(sentences=LENS.count(size)))


def _search(model, s: Subject, size: str) -> dict:
    from explorer.studies.contrastive.job import SearchSettings, run_search

    # The exact search is bounded by decoder steps alone (never by seconds, which differ between
    # machines and would stop the two searches at different places): a random model's flat
    # distributions leave nothing provable within any budget, so every search runs to its bound.
    settings = {"tiny": SearchSettings(sentences=1, beams=(1, 2), penalties=("none",), exact=True,
                                       exact_nodes=30, exact_seconds=3600),
                "slice": SearchSettings(sentences=1, beams=(1, 2, 4), exact=True, exact_nodes=100,
                                        exact_seconds=3600),
                "timed": SearchSettings(sentences=16, exact=True, exact_sentences=2, exact_nodes=1000,
                                        exact_seconds=3600)}[size]
    return run_search(model, s.tokenizer, s.pairs, settings)


HEADS = Analysis("heads", "head lab", "sentence", _heads, {"tiny": 1, "slice": 1, "timed": 16},
                 "the defaults but the sentence count: 3 seeds, 3 points, every single removal decoded, batches of 16")
ALIGN = Analysis("align", "alignment scorecard", "gold pair", _align, {"tiny": 1, "slice": 2, "timed": 16},
                 "every gold pair with attributions (32 integrated-gradients steps), eflomal left out")
CONTRIBUTIONS = Analysis("contributions", "contributions + faithfulness", "sentence", _contributions,
                         {"tiny": 1, "slice": 2, "timed": 16},
                         "ALTI+ on every sentence; the faithfulness check at its defaults (6 methods, 3 "
                         "fractions, 3 random seeds, 16 integrated-gradients steps) on the first 8")
LENS = Analysis("lens", "lenses", "sentence", _lens, {"tiny": 1, "slice": 1, "timed": 16},
                "the defaults: greedy, forced on the model's output, batches of 16")
SEARCH = Analysis("search", "search + exact search", "sentence", _search, {"tiny": 1, "slice": 1, "timed": 16},
                  "beams 1, 2, 4, 8, 16, 32, each without a length penalty and with GNMT's 0.6; exact search "
                  "on the first 2 sentences, 1,000 decoder steps each")
ANALYSES = (HEADS, ALIGN, CONTRIBUTIONS, LENS, SEARCH)
BY_STAGE = {a.stage: a for a in ANALYSES}


def analysis_stage(stage: str) -> Callable:
    """The GPU check's stage function for one analysis (benchmarks/gpu.py lists them)."""
    analysis = BY_STAGE[stage]

    def run_stage(run) -> dict:
        s = subject(run)
        compared, timed = ("tiny", "tiny") if run.tiny else ("slice", "timed")
        tolerance = TOLERANCES[analysis.name]
        start = time.perf_counter()
        on_cpu = analysis.run(s.cpu, s, compared)
        cpu_seconds = time.perf_counter() - start
        on_device = analysis.run(s.device, s, compared)
        same = compare_results(on_cpu, on_device, tolerance)
        _sync(run.device)
        start = time.perf_counter()
        analysis.run(s.device, s, timed)
        _sync(run.device)
        seconds = time.perf_counter() - start
        n_slice, n_timed = analysis.count(compared), analysis.count(timed)
        per = seconds / n_timed
        verdict = "pass" if same.ok else "FAIL"
        line = (f"{analysis.stage} ({s.label}): {per:,.2f} s a {analysis.unit} on {run.device.type} over {n_timed}; "
                f"{n_slice} on cpu == {run.device.type}: {same.numbers} numbers, max |d| {same.worst:.1e} "
                f"(<= {tolerance.atol:g} + {tolerance.rtol:g} x |cpu|), {same.others} others, "
                f"{len(same.unequal)} unequal ({verdict})")
        return {"ok": same.ok, "analysis": analysis.name, "model": s.label, "unit": analysis.unit,
                "timed": {"count": n_timed, "seconds": seconds, "seconds_per_unit": per,
                          "settings": analysis.timed if not run.tiny else "tiny"},
                "compared": {"count": n_slice, "cpu_seconds": cpu_seconds, **same.as_dict()},
                "tolerance": dataclasses.asdict(tolerance), "model_build_seconds": s.build_seconds, "line": line}
    return run_stage


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def perturbed(model: torch.nn.Module, relative: float, seed: int = 1) -> torch.nn.Module:
    """A copy of `model` with every weight multiplied by (1 + relative x a standard normal draw)."""
    copied = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in copied.parameters():
            p.mul_(1 + relative * torch.randn(p.shape, generator=generator))
    return copied


def perturbation(argv: list[str] | None = None) -> int:
    """How far float32-sized changes move each analysis: the compared slice on the CPU model against a
    copy with every weight changed by --perturb (relative); what TOLERANCES rests on."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_analyses", description=perturbation.__doc__.split(";")[0])
    parser.add_argument("--perturb", type=float, default=1e-6, help="relative change of every weight")
    parser.add_argument("--tiny", action="store_true", help="the tiny model and sizes (seconds) instead of base")
    parser.add_argument("--only", action="append", choices=[a.name for a in ANALYSES], help="these analyses only")
    args = parser.parse_args(argv)
    s = build_subject(torch.device("cpu"), args.tiny)
    other = perturbed(s.cpu, args.perturb)
    size = "tiny" if args.tiny else "slice"
    print(f"{s.label}; every weight changed by a relative {args.perturb:g}", flush=True)
    for analysis in ANALYSES:
        if args.only and analysis.name not in args.only:
            continue
        found = compare_results(analysis.run(s.cpu, s, size), analysis.run(other, s, size), TOLERANCES[analysis.name])
        print(f"{analysis.stage}: {found.numbers} numbers, largest move {found.worst:.2e} at {found.worst_path}; "
              f"{found.others} texts/counts/labels, {len(found.unequal)} changed {found.unequal[:SHOWN]}; "
              f"{len(found.outside)} outside the tolerance {found.outside[:SHOWN]}", flush=True)
    return 0


if __name__ == "__main__":          # a helper of the GPU check, not a benchmark: no main() (benchmarks/__main__.py)
    raise SystemExit(perturbation())
