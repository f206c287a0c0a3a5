"""Transcoders on a shipped checkpoint's FFNs: how well each site's dictionary explains its FFN on held-out
rows, beside the random-decoder baseline, and what training costs.

    python -m benchmarks features [--checkpoint checkpoints/bible-es-en] [--site SITE ...] [--rows 200000]
                                  [--width 1024] [--k 32] [--steps 3000]
    python -m benchmarks features --detect [--checkpoint ...] [--pairs 1000] [--words 50] [--sites resid]
    python -m benchmarks features --numbers 23 --checkpoint checkpoints/numbers-en-de --pairs 500 [--sites resid]
    python -m benchmarks features --page [--checkpoint ...] [--text SENTENCE]
    python -m benchmarks features --busiest-at 300 500 1000 3000 [--checkpoint ...] [--site SITE ...]
    python -m benchmarks features --mean-ablation 200 [--checkpoint ...]
    python -m benchmarks features --site-job SITE [--checkpoint ...]

Per site: rows collected from the training split (at most --rows, drawn evenly) and 20,000 from the
development split (held out); a TopK transcoder trained on the first (its linear skip as --skip says), and
the random baseline (the same k, width and skip, decoder directions random and frozen); printed for both: the fraction of variance
explained on the held-out rows (and a least-squares linear map's, the skip's share alone), the mean
active latents, the dead latents' share, the busiest latent's density; and the seconds spent collecting and training (the machine's load beside them: these machines are noisy).

--aux-loss-coefficient, --dead-feature-window (the transcoders), --sae-aux-loss-coefficient,
--sae-dead-feature-window (the stream SAEs): AuxK, the dead latents' auxiliary loss (transcoder.py), for
the dictionaries trained here (a kept dictionary is used as it is: give a runs folder of its own,
EXPLORER_RUNS_DIR=..., to compare).

--skip always|never|auto: the FFN sites' transcoders (and their baselines) with the linear skip, without it,
or (the command's default) without it unless a latent of the plain one turns dense (docs/FEATURES.md).

--busiest-at STEP ...: one plain transcoder per site (--site, else every FFN), and its busiest latent's share
of the held-out rows at each of those steps: what `--skip auto` looks at, a third of the way and at the end.

--mean-ablation N: CE recovered's two ends without a dictionary: the CE per forced target token of the first
N held-out pairs (teacher-forced on their references, as `features evaluate`), the model's and with every FFN
replaced by its mean output over those pairs' real positions (features.splice), and the seconds.

--site-job SITE: the Features page's one-site job as the app starts it (job.run_site with the app's settings,
webapp.views.feature_sites.app_settings; the training split and the checkpoint's held-out pairs), into a
runs folder of its own that is removed after: its seconds, its held-out figures, the process's peak RSS.

--sites resid: the residual-stream SAEs ("encoder.layers.i.resid") instead of the FFNs' transcoders, for
--detect and --numbers as for the quality figures.

--detect and --numbers: the dictionaries `python -m explorer features train` saved (an encoder site
without one is trained here first, with --steps, --rows and the sizes, and kept where the command and the
app keep theirs), each encoder site's and its random baseline's;
--detect: asked which single feature best detects each of the --words most frequent word pairs the
training data ties both ways (explorer.studies.grounding.links.mutual_pairs; --frequent: the most
frequent source words, which include the glue words the links leave out; --aligned: the word pairs eflomal
links most often over the training pairs, explorer.studies.align.statistical.frequent_pairs, whose source
words are asked about, each once), over the source pieces of
the first --pairs development pairs (--by word: over its word occurrences, a word found where its feature
fires on any of its pieces; explorer.studies.features.detection): the median best F1 of each,
and the words each detects best and worst.
"""
from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from explorer.data import load_corpus
from explorer.files.places import REPO_ROOT
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.features import sites
from explorer.studies.features.job import RANGES, SKIP_MODES, FeatureSettings
from explorer.studies.features.site_training import train_site
from explorer.evaluation.arguments import count
from explorer.studies.common.command import settings_from
from explorer.studies.common.training_data import dataset_of, training_pairs

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks features")
    parser.add_argument("--checkpoint", default=str(REPO_ROOT / "checkpoints" / "bible-es-en"))
    parser.add_argument("--site", action="append", help="a site (default: every one of --sites; --detect and "
                        "--numbers: every encoder one)")
    parser.add_argument("--rows", type=int, default=FeatureSettings.rows)
    parser.add_argument("--width", type=int, default=FeatureSettings.width)
    parser.add_argument("--k", type=int, default=FeatureSettings.k)
    parser.add_argument("--steps", type=int, default=FeatureSettings.steps)
    parser.add_argument("--sae-width", type=int, default=FeatureSettings.sae_width, help="resid sites' latents "
                        "(0: twice the model's width)")
    parser.add_argument("--sae-k", type=int, default=FeatureSettings.sae_k)
    parser.add_argument("--aux-loss-coefficient", type=float, default=FeatureSettings.aux_loss_coefficient,
                        help="AuxK's weight, the transcoders (0: off; the paper's 1/32 is 0.03125)")
    parser.add_argument("--dead-feature-window", type=int, default=FeatureSettings.dead_feature_window,
                        help="AuxK, the transcoders: steps without firing before a latent counts as dead")
    parser.add_argument("--sae-aux-loss-coefficient", type=float, default=FeatureSettings.sae_aux_loss_coefficient,
                        help="AuxK's weight, the stream SAEs (0: off)")
    parser.add_argument("--sae-dead-feature-window", type=int, default=FeatureSettings.sae_dead_feature_window,
                        help="AuxK, the stream SAEs: steps without firing before a latent counts as dead")
    parser.add_argument("--skip", choices=SKIP_MODES, default=FeatureSettings.skip, help="the FFNs' transcoders' "
                        "linear skip (and so their random baselines'): always, never, or auto (the command's)")
    parser.add_argument("--sites", choices=("ffn", "resid"), default="ffn", help="the FFNs' transcoders or the "
                        "residual streams' SAEs")
    parser.add_argument("--detect", action="store_true", help="word detection by the saved dictionaries")
    parser.add_argument("--scale", type=float, nargs="+", default=[1.0], help="--numbers: the next unit's feature is "
                        "set to this many times its typical value (several: each in turn)")
    parser.add_argument("--page", action="store_true", help="the time of a feature's page's computations")
    parser.add_argument("--busiest-at", type=count("busiest-at", 1, RANGES["steps"][1]), nargs="+", metavar="STEP", help="the plain transcoder's busiest "
                        "latent on the held-out rows at these steps of one training (what auto looks at)")
    parser.add_argument("--text", default="En el principio creó Dios los cielos y la tierra.",
                        help="--page: the sentence")
    parser.add_argument("--pairs", type=int, default=1000, help="--detect: development pairs read")
    parser.add_argument("--aligned", action="store_true",
                        help="--detect: the source words of the --words word pairs eflomal links most often over "
                             "the training pairs instead (glue words included)")
    parser.add_argument("--frequent", action="store_true", help="--detect: the most frequent source words instead "
                        "(glue words included, which the links leave out)")
    parser.add_argument("--words", type=int, default=50, help="--detect: word pairs asked about")
    parser.add_argument("--by", choices=("piece", "word"), default="piece",
                        help="--detect: count pieces, or word occurrences (a word found when its feature fires on "
                             "any of its pieces)")
    parser.add_argument("--mean-ablation", type=count("mean-ablation", 1, RANGES["sentences"][1]), default=0,
                        metavar="N", help="the model's CE and its every-FFN mean-ablated CE on N held-out pairs")
    parser.add_argument("--site-job", metavar="SITE", help="the Features page's one-site job, timed")
    parser.add_argument("--numbers", type=int, default=0, help="the numbers model's unit words: detection, then "
                        "clamping on this many numbers per unit (e.g. 23: about 200 in all)")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    if args.detect:
        return detect(args)
    if args.numbers:
        return numbers(args)
    if args.page:
        return page(args)
    if args.busiest_at:
        return busiest(args)
    if args.mean_ablation:
        return mean_ablation(args)
    if args.site_job:
        return site_job(args)
    ckpt = load_checkpoint(args.checkpoint)
    train_pairs, dev = training_pairs(ckpt.meta), load_corpus(dataset_of(ckpt.meta)).dev
    settings = _settings(args)
    print(f"{ckpt.name}: width {settings.width}, k {settings.k} (SAEs: {settings.sae_width or 'twice d'}, "
          f"{settings.sae_k}), {settings.steps} steps of {settings.batch} rows, AuxK weight "
          f"{settings.aux_loss_coefficient:g} (window {settings.dead_feature_window} steps; SAEs "
          f"{settings.sae_aux_loss_coefficient:g}, window {settings.sae_dead_feature_window})")
    for site in args.site or sites.all_sites(ckpt.model, args.sites):
        row, _, seconds = train_site(ckpt.model, ckpt.tokenizer, train_pairs, dev, site, settings)
        print(f"{site:22s} FVE {row['fve']:.3f} (random {row['fve_random']:.3f}, +{row['fve'] - row['fve_random']:.3f}; "
              f"linear map {row.get('fve_linear', float('nan')):.3f})  L0 {row['l0']:.1f}  "
              f"dead {row['dead_fraction']:.1%} (random "
              f"{row['dead_fraction_random']:.1%})  busiest {row['max_density']:.1%}{_form(row)}  rows {row['rows']:,}/"
              f"{row['held_rows']:,}  collect {seconds['collect']:.0f} s  train {seconds['train']:.0f} s  "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    return 0


def mean_ablation(args) -> int:
    from explorer.studies.common.command import checkpoint_and_held_out
    from explorer.studies.common.sentences import build_sentences
    from explorer.studies.features import splice

    loaded = checkpoint_and_held_out(args.checkpoint, "cpu")
    if loaded is None:
        return 2
    ckpt, pairs = loaded
    start = time.perf_counter()
    sents = build_sentences(ckpt.model, ckpt.tokenizer, pairs, args.mean_ablation, "reference")
    ffns = sites.all_sites(ckpt.model, "ffn")
    means = splice.mean_outputs(ckpt.model, sents, ffns)
    model_ce = splice.target_ce(ckpt.model, sents)
    with splice.spliced(ckpt.model, {site: splice.by_mean(means[site]) for site in ffns}):
        ablated = splice.target_ce(ckpt.model, sents)
    print(f"{ckpt.name}, the first {len(sents)} held-out pairs: CE per target token {model_ce:.3f} for the model, "
          f"{ablated:.3f} with every FFN ({len(ffns)}) mean-ablated  ({time.perf_counter() - start:.0f} s)")
    return 0


def site_job(args) -> int:
    import resource
    import tempfile

    from explorer.evaluation.scores import held_out_pairs
    from explorer.studies.common.context import RunContext
    from explorer.studies.features.job import run_site
    from webapp.views.feature_sites import app_settings

    ckpt = load_checkpoint(args.checkpoint)
    settings = app_settings(args.site_job)
    train_pairs, held = training_pairs(ckpt.meta), held_out_pairs(ckpt.path, ckpt.meta)[0]
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        row = run_site(ckpt.model, ckpt.tokenizer, train_pairs, held, settings, site=args.site_job, root=Path(root),
                       context=RunContext(meta=ckpt.meta))["layer"]
        seconds = time.perf_counter() - start
    print(f"{ckpt.name} {args.site_job}: the app's one-site job ({settings.steps:,} steps, {settings.rows:,} rows) "
          f"in {seconds:.0f} s (load average {os.getloadavg()[0]:.1f}): FVE {row['fve']:.3f} (random "
          f"{row['fve_random']:.3f}{_form(row)}), peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GB")
    return 0


def _form(row: dict) -> str:
    """Which transcoder a site got: with its skip or not, and how dense the plain one was when it was refused."""
    if "skip" not in row:
        return ""
    dense = row.get("max_density_without_skip")
    return (" skip" if row["skip"] else " no skip") + ("" if dense is None else f" (plain: busiest {dense:.1%} after "
                                                                                f"{row.get('without_skip_steps')} steps)")


def _settings(args) -> FeatureSettings:
    """The settings the flags name (each flag's dest is a FeatureSettings field), the others at their default."""
    return settings_from(args, FeatureSettings)


def encoder_dictionaries(args, ckpt) -> dict:
    """{site: {kind: dictionary}} for each encoder site of --sites: the kept ones, or trained here first (the
    app's one-site job, its result kept beside them so the Features page shows its figures)."""
    from explorer.files.names import FEATURES_KINDS
    from explorer.studies.common.context import RunContext
    from explorer.studies.features import files
    from explorer.studies.features.job import SITE, dictionary_folder, site_result_path

    model, sha = ckpt.model, ckpt.meta["weights_sha256"]
    found = {}
    for site in [s for s in sites.all_sites(model, args.sites) if s.startswith("encoder.")
                 and (not args.site or s in args.site)]:
        def loaded():
            return {kind: files.load(dictionary_folder(sha, site, kind), site=site, weights_sha256=sha,
                                     d_model=model.cfg.d_model) for kind in FEATURES_KINDS}
        try:
            found[site] = loaded()
        except files.DictionaryUnusable:
            started = time.perf_counter()
            result = SITE.to_file(site_result_path(sha, site), model, ckpt.tokenizer, training_pairs(ckpt.meta),
                                  load_corpus(dataset_of(ckpt.meta)).dev, _settings(args), site=site,
                                  context=RunContext(meta=ckpt.meta))
            row = result["layer"]
            print(f"{site:22s} trained: width {row.get('width')}, k {row.get('k')}, FVE {row['fve']:.3f} (random "
                  f"{row['fve_random']:.3f}), dead {row['dead_fraction']:.1%} "
                  f"(random {row['dead_fraction_random']:.1%}), "
                  f"busiest {row['max_density']:.1%}{_form(row)}, rows {row['rows']:,}, steps {args.steps:,}; the job took "
                  f"{time.perf_counter() - started:.0f} s (load {os.getloadavg()[0]:.1f})", flush=True)
            found[site] = loaded()
    return found


def detect(args) -> int:
    from explorer.studies.features.detection import detect as run
    from explorer.studies.grounding.build import ensure
    from explorer.studies.grounding.links import mutual_pairs

    ckpt = load_checkpoint(args.checkpoint)
    dictionaries = encoder_dictionaries(args, ckpt)
    index = ensure(args.checkpoint, ckpt.meta)
    word_pairs = mutual_pairs(index.links, args.words)
    if args.frequent:
        word_pairs = [(w, "", n) for w, n in sorted(index.src_words.items(), key=lambda kv: -kv[1])[:args.words]]
    if args.aligned:
        from explorer.studies.align.statistical import frequent_pairs
        word_pairs = frequent_pairs(load_corpus(dataset_of(ckpt.meta)).train, args.words)
    held = load_corpus(dataset_of(ckpt.meta)).dev[:args.pairs]
    which = "linked by eflomal" if args.aligned else "of the most frequent source words" if args.frequent else \
        "tied both ways"
    print(f"{ckpt.name}: {len(word_pairs)} word pairs {which}, the most frequent first: "
          + ", ".join(f"{s}-{t} ({n})" for s, t, n in word_pairs[:8]) + f" ...; {len(held)} development pairs")
    for site in [s for s in dictionaries if s.startswith("encoder.")]:
        found = {kind: run(ckpt.model, ckpt.tokenizer, held, site, tc, [s for s, _, _ in word_pairs], by=args.by)
                 for kind, tc in dictionaries[site].items()}
        got, base = found["trained"], found["random"]
        order = np.argsort(-got.best_f1)
        print(f"{site:22s} median best F1 by {args.by} {got.median:.3f} (random {base.median:.3f}, {got.median - base.median:+.3f}) "
              f"over {len(got.words)} words; best: " + ", ".join(f"{got.words[i]} {got.best_f1[i]:.2f}" for i in order[:4])
              + "; worst: " + ", ".join(f"{got.words[i]} {got.best_f1[i]:.2f}" for i in order[-3:]), flush=True)
    return 0


UNITS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
GERMAN = ({"ein", "eins"}, {"zwei"}, {"drei"}, {"vier"}, {"fünf"}, {"sechs"}, {"sieben"}, {"acht"}, {"neun"})


def numbers(args) -> int:
    """The numbers model's unit words, at each encoder site of --sites: the feature that best detects each
    (precision, recall), where it fires besides, and that feature set to 0 with the next unit's feature set
    to --scale x its typical value, at the unit's positions: how often the German unit morpheme changes
    (and how often it becomes the next unit's)."""
    from explorer.studies.features.detection import detect as run

    ckpt = load_checkpoint(args.checkpoint)
    model, tok = ckpt.model, ckpt.tokenizer
    held = load_corpus(dataset_of(ckpt.meta)).dev[:args.pairs]
    dictionaries = encoder_dictionaries(args, ckpt)
    for site, made in dictionaries.items():
        found = {kind: run(model, tok, held, site, tc, UNITS) for kind, tc in made.items()}
        got = found["trained"]
        met = int(((got.precision >= 0.9) & (got.recall >= 0.8)).sum())
        print(f"{site:22s} " + "  ".join(f"{w} P {p:.2f} R {r:.2f}" for w, p, r in zip(got.words, got.precision,
                                                                                         got.recall))
              + f"  | {met}/{len(got.words)} at P >= 0.9 and R >= 0.8 (random: "
              + f"{int(((found['random'].precision >= 0.9) & (found['random'].recall >= 0.8)).sum())})", flush=True)
        feature = {w: int(f) for w, f in zip(got.words, got.best_feature)}
        also_fires(model, tok, held, site, made["trained"], feature)
        for scale in args.scale:
            clamp_units(model, tok, held, site, made["trained"], feature, scale, args.numbers)
    return 0


def also_fires(model, tok, held, site: str, tc, feature: dict) -> None:
    """Where each unit's feature fires besides its own word: the words (span_word's, the whole word a piece
    belongs to) of its other firings, the most frequent first; and the pieces of those words."""
    from collections import Counter

    from explorer.studies.features.detection import piece_words
    from explorer.studies.features.sites import every_row

    src, labels = piece_words(model, tok, held)
    pieces = [tok.id_to_piece(i, "src") for s in src for i in s]
    with torch.no_grad():
        z = tc.encode(torch.from_numpy(every_row(model, src, [[] for _ in src], site).inputs))     # [N, m]
    for word, f in feature.items():
        fired = torch.nonzero(z[:, f] > 0)[:, 0].tolist()
        other = Counter((labels[i], pieces[i]) for i in fired if labels[i] != word)
        print(f"  {word}'s feature {f}: fires {len(fired)} times, {sum(other.values())} not on '{word}': "
              + ", ".join(f"{w} [{p}] {n}" for (w, p), n in other.most_common(4)), flush=True)


def clamp_units(model, tok, held, site: str, tc, feature: dict, scale: float, per_unit: int) -> None:
    """At the unit word's positions, its feature set to 0 and the next unit's to `scale` x its typical value
    (its mean activation on its own word's pieces), the number translated again: how often the German unit
    changes, and how often it becomes the next unit's."""
    from explorer.studies.common.sentences import greedy_ids
    from explorer.studies.features.reading import sentence_features
    from explorer.studies.features.steering import clamped, positions_mask

    eos = model.cfg.special.eos
    typical = {}
    for pair in held:                                         # each unit feature's mean value on its own word
        src = tok.encode(pair.src, side="src") + [eos]
        z = sentence_features(model, tc, site, src, src[:1], shown=tc.k)
        pieces = [tok.id_to_piece(i, "src") for i in src]
        for t, piece in enumerate(pieces):
            word = piece.lstrip("▁")
            if word in feature:
                row = dict(zip(z.features[t].tolist(), z.values[t].tolist()))
                typical.setdefault(word, []).append(row.get(feature[word], 0.0))
    typical = {w: float(np.mean(v)) for w, v in typical.items()}
    print(f"clamping at {site}: each unit's feature to 0, the next unit's to {scale:g} x its typical value "
          + ", ".join(f"{w} {v:.2f}" for w, v in typical.items()), flush=True)
    changed = became = total = 0
    for u, unit in enumerate(UNITS):
        nxt = UNITS[(u + 1) % len(UNITS)]
        if unit not in feature or nxt not in feature:
            continue
        cases = [p for p in held if unit in p.src.split()][:per_unit]
        got_u = got_v = 0
        for pair in cases:
            src = tok.encode(pair.src, side="src") + [eos]
            at = [t for t, i in enumerate(src) if tok.id_to_piece(i, "src").lstrip("▁") == unit]
            before = tok.decode(greedy_ids(model, [src])[0], side="tgt").split()
            mask = positions_mask(len(src), at)
            with clamped(model, site, tc, feature[unit], 0.0, mask), \
                    clamped(model, site, tc, feature[nxt], scale * typical[nxt], mask):
                after = tok.decode(greedy_ids(model, [src])[0], side="tgt").split()
            count = lambda words, u: sum(w in GERMAN[u] for w in words)      # noqa: E731
            got_u += count(after, u) < count(before, u)
            got_v += count(after, (u + 1) % len(UNITS)) > count(before, (u + 1) % len(UNITS))
        print(f"  {unit} -> {nxt}: {len(cases)} numbers, the German unit changed in {got_u}, became the next "
              f"unit's in {got_v}", flush=True)
        changed, became, total = changed + got_u, became + got_v, total + len(cases)
    print(f"{site} at {scale:g} x typical: changed in {changed}/{total} ({changed / max(total, 1):.0%}), became the "
          f"next unit's in {became}/{total} ({became / max(total, 1):.0%})", flush=True)


def busiest(args) -> int:
    """--busiest-at: at each site, one plain training (--steps, or the last step asked, whichever is more),
    and the largest share of held-out rows one latent fires on at each step asked (transcoder.train's
    give_up, which sees the latents as they stand, never giving up): how early a plain transcoder shows it
    will be dense (site_training.probe_step)."""
    from explorer.studies.features import metrics
    from explorer.studies.features import transcoder as tcm

    ckpt = load_checkpoint(args.checkpoint)
    train_pairs, dev = training_pairs(ckpt.meta), load_corpus(dataset_of(ckpt.meta)).dev
    settings = replace(_settings(args), steps=max(args.steps, *args.busiest_at))
    asked = set(args.busiest_at)
    for site in args.site or sites.all_sites(ckpt.model, "ffn"):
        rows = sites.collect(ckpt.model, ckpt.tokenizer, train_pairs, site, settings.rows, settings.seed)
        held = sites.collect(ckpt.model, ckpt.tokenizer, dev, site, settings.held_rows, settings.seed + 1)
        seen = {}

        def look(step, encode):
            if step in asked:
                seen[step] = metrics.busiest_share(encode, held.inputs)
            return False

        started = time.perf_counter()
        tcm.train(rows.inputs, rows.outputs, settings.train_settings(site, ckpt.model.cfg.d_model, skip=False),
                  give_up=look)
        print(f"{site:22s} busiest " + "  ".join(f"{step}: {share:.3f}" for step, share in sorted(seen.items()))
              + f"  ({time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.1f})", flush=True)
    return 0


def page(args) -> int:
    """What a feature's page computes once its dictionary is loaded, timed on 10 features of each site the
    command trained: the sentence's features, the feature's effects at its 20 contexts, a steer, and (when
    the checkpoint's run has others here) the feature at its contexts in each checkpoint of the run (loaded
    once, timed apart); beside a plain greedy translation of the same sentence in the same process (the
    machine's speed that minute)."""
    from explorer.studies.common.sentences import greedy_ids
    from explorer.studies.features.job import load_site
    from explorer.studies.features.reading import context_effects, sentence_features
    from explorer.studies.features.steering import steer
    from explorer.evaluation.comparison import runs_of
    from explorer.store.catalog import list_checkpoints
    from explorer.studies.features.over_training import activation_over_training

    ckpt = load_checkpoint(args.checkpoint)
    model, tok, sha = ckpt.model, ckpt.tokenizer, ckpt.meta["weights_sha256"]
    pairs = training_pairs(ckpt.meta)
    src = tok.encode(args.text, side="src") + [model.cfg.special.eos]
    here = Path(args.checkpoint).resolve()
    group = next((g for g in runs_of(list_checkpoints(here.parent))
                  if any(Path(str(i.path)).resolve() == here for i in g.checkpoints)), None)
    t0 = time.perf_counter()
    run = [(i.name, c.model, c.tokenizer) for i in (group.checkpoints if group else [])
           for c in [ckpt if Path(str(i.path)).resolve() == here else load_checkpoint(i.path)]]
    print(f"the run's checkpoints: {', '.join(r[0] for r in run) or 'none'} (the others loaded once in "
          f"{time.perf_counter() - t0:.2f} s)", flush=True)
    for site in args.site or sites.sites(model):
        tc, _, index = load_site(model, sha, site, len(pairs))
        t0 = time.perf_counter()
        out = greedy_ids(model, [src])[0] + [model.cfg.special.eos]
        plain = time.perf_counter() - t0
        found = sentence_features(model, tc, site, src, out)
        features = [int(f) for f in np.unique(found.features[found.features >= 0])][:10]
        times = []
        for f in features:
            t0 = time.perf_counter()
            sentence_features(model, tc, site, src, out)
            context_effects(model, tok, tc, site, f, pairs, index.contexts(f))
            steer(model, tc, site, f, 0.0, src, out, None if site.startswith("decoder.") else [0])
            if len(run) > 1:
                activation_over_training(tok, tc, site, f, pairs, index.contexts(f), run)
            times.append(time.perf_counter() - t0)
        print(f"{site:22s} a feature's page: median {np.median(times):.3f} s, max {max(times):.3f} s over "
              f"{len(times)} features (a greedy translation of the sentence: {plain:.3f} s)", flush=True)
    return 0
