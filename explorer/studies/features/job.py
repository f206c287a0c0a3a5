"""Dictionaries for every FFN (and, with sites="resid" or "all", every layer's residual stream) of a
checkpoint (train), and how much of the model they carry (evaluate).

train: for each site (encoder layers first), a TopK transcoder (with its linear skip where the plain one's
latents turn dense: FeatureSettings.skip) and its random-decoder baseline trained and scored on the site's
rows (site_training.train_site), both saved in SAELens's format under
runs/features/<weights sha>/<site>/{trained,random}/ (files.save). The folders are written as each site ends, so a cancelled run keeps
the sites it finished; the result file only when all are done.

evaluate: the saved dictionaries of every site, refused in one line when one is missing or not made for
these weights (files.load); on the given pairs, each site's quality; CE with every FFN replaced by its
dictionary at once, by the random baseline's, and by its mean output (splice); greedy BLEU / chrF with
the dictionaries spliced in beside the model's own.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

from explorer.evaluation.arguments import check_ranges
from explorer.evaluation.scores import MAX_HELD_OUT, corpus_scores
from explorer.files.atomic import write_json_atomic
from explorer.files.names import FEATURE_SITE_OUT, FEATURES, FEATURES_KINDS
from explorer.store.run_paths import runs_root
from explorer.studies.common.context import RunContext
from explorer.studies.common.result import Study
from explorer.studies.common.sentences import build_sentences, greedy_texts
from explorer.studies.features import contexts, files, metrics, sites, splice
from explorer.studies.features.site_training import train_site
from explorer.studies.features import transcoder as tcm

RANGES = {"width": (16, 16_384), "k": (1, 512), "sae_width": (0, 16_384), "sae_k": (1, 512),
          "steps": (1, 100_000), "batch": (16, 65_536),
          "rows": (1_000, 500_000), "held_rows": (100, 100_000), "sentences": (1, MAX_HELD_OUT),
          "seed": (0, 2 ** 31 - 1), "aux_loss_coefficient": (0.0, 100.0), "dead_feature_window": (1, 100_000),
          "sae_aux_loss_coefficient": (0.0, 100.0), "sae_dead_feature_window": (1, 100_000)}
TRAIN_KEYS = ("settings", "layers")
EVALUATE_KEYS = ("settings", "layers", "ce", "ce_recovered", "ce_recovered_random", "bleu")
SITE_KEYS = ("settings", "layer")
TRAIN_STAGES = ("dictionaries",)
SITE_STAGES = ("dictionaries", "contexts")
EVALUATE_STAGES = ("rows", "cross-entropy", "translations")


# A residual-stream SAE's sizes, apart from the transcoders' because measured apart (docs/FEATURES.md): on
# numbers-en-de's last encoder layer (d 128) width 256 and k 8 gave one feature per English unit word
# (recall 1.00, precision 0.76-0.97) and explained 0.993 of the stream, while width 1024 split each word's
# feature by context (2 of 9 words detected); a few features per token, as many as twice the stream's
# numbers, is what a stream of a few hundred dimensions about a vocabulary of words needs.
SAE_WIDTH_PER_D = 2       # sae_width 0: this many latents per number of the stream
SAE_K = 8
# AuxK (transcoder.py; Gao et al. 2024, A.2): the weight of the dead latents' auxiliary loss and the steps unfired
# before a latent counts as dead, for a site's dictionary and its random baseline alike, apart by kind because
# measured apart (docs/FEATURES.md, "Dead latents and AuxK"). The transcoders: off (no latent of bible-es-en's
# six FFN transcoders is dead without it). The stream SAEs: SAELens's weight 1, a 25-step window: on numbers-en-de's
# first encoder stream it took the unit words detected from 7 of 9 to 9 of 9 and the dead latents from 17.6%
# to 6.6%, and on bible-es-en's width-512 streams it left FVE and the aligned-pairs gap about where they were.
AUX_LOSS_COEFFICIENT = 0.0
SAE_AUX_LOSS_COEFFICIENT = 1.0
SAE_DEAD_FEATURE_WINDOW = 25
# An FFN transcoder's linear skip: "always", "never", or "auto", the plain transcoder unless one of its latents
# turns dense (site_training.py says the rule, and why).
SKIP_MODES = ("auto", "always", "never")


@dataclass(frozen=True)
class FeatureSettings:
    width: int = tcm.TrainSettings.width          # latents per transcoder (an FFN site)
    k: int = tcm.TrainSettings.k                  # active latents per token (an FFN site)
    sae_width: int = 0                            # latents per residual-stream SAE (0: SAE_WIDTH_PER_D x d_model)
    sae_k: int = SAE_K                            # active latents per token (a residual-stream site)
    steps: int = tcm.TrainSettings.steps          # Adam steps per dictionary
    batch: int = tcm.TrainSettings.batch          # rows per step
    rows: int = 200_000                           # training rows per site (drawn evenly from the training pairs)
    held_rows: int = 20_000                       # held-out rows per site (from the development pairs)
    sentences: int = 200                          # evaluate: the first N pairs
    seed: int = 0
    aux_loss_coefficient: float = AUX_LOSS_COEFFICIENT   # AuxK's weight, an FFN site (0: off); SAELens's name
    dead_feature_window: int = tcm.TrainSettings.dead_feature_window   # AuxK: steps unfired before a latent is dead
    sae_aux_loss_coefficient: float = SAE_AUX_LOSS_COEFFICIENT   # AuxK's weight, a residual-stream site (0: off)
    sae_dead_feature_window: int = SAE_DEAD_FEATURE_WINDOW      # AuxK's window, a residual-stream site
    skip: str = "auto"            # an FFN site's linear skip: one of SKIP_MODES (above)

    def __post_init__(self) -> None:
        check_ranges(self, RANGES)
        if self.k > self.width:
            raise ValueError(f"k ({self.k}) must not exceed width ({self.width})")
        if self.sae_width and self.sae_k > self.sae_width:
            raise ValueError(f"sae_k ({self.sae_k}) must not exceed sae_width ({self.sae_width})")
        if self.skip not in SKIP_MODES:
            raise ValueError(f"skip must be one of {', '.join(SKIP_MODES)}, not {self.skip!r}")
        for width in (self.width, self.sae_width):              # a stream's default width: when its model is known
            tcm.check_step(self.batch, width)

    def forms(self, site: str) -> tuple[bool, ...]:
        """The skip forms a site's dictionary may take, in the order tried: a stream's SAE never has a skip;
        an FFN's transcoder has it always, never, or ("auto") only when the plain one turns dense."""
        if sites.is_stream(site) or self.skip == "never":
            return (False,)
        return (True,) if self.skip == "always" else (False, True)

    def trainings(self, site: str) -> int:
        """How many dictionaries a site may train: each form tried, then the random baseline."""
        return len(self.forms(site)) + 1

    def train_settings(self, site: str, d_model: int, random_decoder: bool = False,
                       skip: bool | None = None) -> tcm.TrainSettings:
        """A site's training: a transcoder (an FFN site; with its skip or not, by default the first form tried),
        or an SAE of its own sizes (a stream)."""
        stream = sites.is_stream(site)
        skip = self.forms(site)[0] if skip is None else skip
        if skip and stream:
            raise ValueError(f"{site} is a residual-stream site: its SAE has no skip")
        width = (self.sae_width or SAE_WIDTH_PER_D * d_model) if stream else self.width
        k = self.sae_k if stream else self.k
        aux, window = ((self.sae_aux_loss_coefficient, self.sae_dead_feature_window) if stream
                       else (self.aux_loss_coefficient, self.dead_feature_window))
        if k > width:
            raise ValueError(f"k ({k}) must not exceed the {site} dictionary's width ({width})")
        return tcm.TrainSettings(width=width, k=k, steps=self.steps, batch=self.batch, seed=self.seed,
                                 random_decoder=random_decoder, skip=skip,
                                 aux_loss_coefficient=aux, dead_feature_window=window)


def dictionary_folder(weights_sha256: str, site: str, kind: str, root: Path | None = None) -> Path:
    """Where a site's dictionary ("trained") or its baseline ("random") is kept for these weights."""
    if kind not in FEATURES_KINDS:
        raise ValueError(f"kind must be one of {FEATURES_KINDS}, not {kind!r}")
    return (root or runs_root() / FEATURES) / str(weights_sha256)[:16] / site / kind


def run_train(model, tokenizer, train_pairs, held_pairs, settings: FeatureSettings = FeatureSettings(), *,
              kinds: str = "ffn", root: Path | None = None, context: RunContext = RunContext()) -> dict:
    """Every site of `kinds` ("ffn", "resid" or "all"), encoder layers first, FFNs before streams."""
    sha, name = context.meta.get("weights_sha256", ""), context.meta.get("name", "")
    names = sites.all_sites(model, kinds)
    ticker = context.ticker()
    steps = [settings.trainings(site) * settings.steps for site in names]
    tick = ticker.stage("dictionaries", sum(steps))
    layers = []
    for i, site in enumerate(names):
        done = sum(steps[:i])
        row, made, seconds = train_site(model, tokenizer, train_pairs, held_pairs, site, settings,
                                        on_step=lambda step, done=done: ticker.check(tick, done + step))
        index = contexts.build(model, tokenizer, train_pairs, site, made["trained"], seed=settings.seed)
        row = {**row, "dictionary_sha256": _keep(made, index, site, sha, name, root)}
        write_json_atomic(site_result_path(sha, site, root), {"settings": {**context.checkpoint(), **asdict(settings),
                                                                           "site": site}, "layer": row})
        layers.append(row)
        context.say(f"{_layer_line(row)}  {sum(seconds.values()):.0f} s")     # the time is said, not kept:
    return {"settings": {**context.checkpoint(), **asdict(settings), "sites": kinds},       # one seed, one file
            "layers": layers}


def _keep(made: dict, index, site: str, sha: str, name: str, root: Path | None) -> str:
    """A site's two dictionaries saved, then the trained one's training contexts (contexts.build) beside it;
    the trained dictionary's weights hash, which its figures (site.json) name: a figure of another
    training is then known for one (views.feature_sites.quality_caption)."""
    for kind, tc in made.items():
        files.save(tc, dictionary_folder(sha, site, kind, root), site=site, weights_sha256=sha, model_name=name,
                   random_decoder=kind == "random")
    contexts.save(index, dictionary_folder(sha, site, "trained", root))
    return made["trained"].file_sha256                           # files.save's hash of what it wrote


def site_result_path(weights_sha256: str, site: str, root: Path | None = None) -> Path:
    """The one-site job's result (its held-out figures), beside the site's two dictionaries."""
    return dictionary_folder(weights_sha256, site, FEATURES_KINDS[0], root).parent / FEATURE_SITE_OUT


def run_site(model, tokenizer, train_pairs, held_pairs, settings: FeatureSettings = FeatureSettings(), *, site: str,
             root: Path | None = None, context: RunContext = RunContext()) -> dict:
    """One site's dictionary, baseline and training contexts (the app's job: a page needs one layer)."""
    sha, name = context.meta.get("weights_sha256", ""), context.meta.get("name", "")
    sites.module(model, site)                                 # an unknown site is refused before any work
    ticker = context.ticker()
    tick = ticker.stage("dictionaries", settings.trainings(site) * settings.steps)
    row, made, _seconds = train_site(model, tokenizer, train_pairs, held_pairs, site, settings,
                                     on_step=lambda step: ticker.check(tick, step))
    tick = ticker.stage("contexts", 1)
    index = contexts.build(model, tokenizer, train_pairs, site, made["trained"], seed=settings.seed)
    ticker.check(tick, 1)                  # a Cancel up to here keeps nothing; from here on all is written
    row = {**row, "dictionary_sha256": _keep(made, index, site, sha, name, root)}
    return {"settings": {**context.checkpoint(), **asdict(settings), "site": site}, "layer": row}


def load_site(model, weights_sha256: str, site: str, n_pairs: int, root: Path | None = None):
    """(dictionary, random baseline, training contexts) of one site; DictionaryUnusable (one line) when any
    is missing, damaged or not made for these weights."""
    d = model.cfg.d_model
    trained, baseline = (files.load(dictionary_folder(weights_sha256, site, kind, root), site=site,
                                    weights_sha256=weights_sha256, d_model=d) for kind in FEATURES_KINDS)
    index = contexts.load(dictionary_folder(weights_sha256, site, "trained", root), site=site, width=trained.width,
                          n_pairs=n_pairs)
    return trained, baseline, index


def load_all(model, weights_sha256: str, root: Path | None = None, kinds: str = "ffn",
             which: tuple[str, ...] = FEATURES_KINDS) -> dict[str, dict[str, tcm.TopKTranscoder]]:
    """{site: {kind: dictionary}} for every site of `kinds` ("ffn": every FFN, as the graphs read them;
    "resid"; "all"), of each kind in `which` (the trained dictionary and its random baseline; a graph reads
    the trained ones alone); files.DictionaryUnusable (one line) when one is missing, damaged or not made for
    these weights."""
    d = model.cfg.d_model
    return {site: {kind: files.load(dictionary_folder(weights_sha256, site, kind, root), site=site,
                                    weights_sha256=weights_sha256, d_model=d) for kind in which}
            for site in sites.all_sites(model, kinds)}


def run_evaluate(model, tokenizer, pairs, settings: FeatureSettings = FeatureSettings(), *, forced: str = "reference",
                 kinds: str = "ffn", root: Path | None = None, context: RunContext = RunContext()) -> dict:
    """The dictionaries' quality on `pairs` (objects with .src and .tgt; .tgt unused when forced="output",
    the model's own greedy output then being what the decoder reads and BLEU is measured against). Every
    site of `kinds` is spliced at once (with "all": transcoders and SAEs together)."""
    sha = context.meta.get("weights_sha256", "")
    dictionaries = load_all(model, sha, root, kinds)
    names = list(dictionaries)
    ticker = context.ticker()
    sents = build_sentences(model, tokenizer, pairs, settings.sentences, forced)
    if forced == "output":
        eos = model.cfg.special.eos
        sents = replace(sents, refs=[tokenizer.decode(ids[:-1] if ids[-1:] == [eos] else ids, side="tgt")
                                     for ids in sents.out])
    tick = ticker.stage("rows", len(names))
    layers = []
    for i, site in enumerate(names):
        held = sites.collect_sentences(model, sents, site, settings.held_rows, settings.seed + 1)
        got, base = (metrics.quality(dictionaries[site][kind], held.inputs, held.outputs) for kind in FEATURES_KINDS)
        layers.append({"site": site, "fve": round(got.fve, 5), "fve_random": round(base.fve, 5),
                       "dead_fraction": round(got.dead_fraction, 5), "l0": round(got.l0, 3),
                       "max_density": round(got.max_density, 5), "rows": got.rows})
        ticker.check(tick, i + 1)
    tick = ticker.stage("cross-entropy", 4)
    means = splice.mean_outputs(model, sents, names)
    ce = {"model": splice.target_ce(model, sents)}
    ticker.check(tick, 1)
    for label, make in (("spliced", lambda s: splice.by_transcoder(dictionaries[s]["trained"])),
                        ("spliced_random", lambda s: splice.by_transcoder(dictionaries[s]["random"])),
                        ("mean_ablated", lambda s: splice.by_mean(means[s]))):
        with splice.spliced(model, {site: make(site) for site in names}):
            ce[label] = splice.target_ce(model, sents)
        ticker.check(tick, len(ce))
    tick = ticker.stage("translations", 2)
    own = greedy_texts(model, tokenizer, sents, stop=context.stopped)
    ticker.check(tick, 1)
    with splice.spliced(model, {site: splice.by_transcoder(dictionaries[site]["trained"]) for site in names}):
        with_dictionaries = greedy_texts(model, tokenizer, sents, stop=context.stopped)
    ticker.check(tick, 2)
    scored = {"model": corpus_scores(own, sents.refs), "spliced": corpus_scores(with_dictionaries, sents.refs)}
    return {
        "settings": {**context.checkpoint(), **asdict(settings), "sentences": len(sents), "forced": forced,
                     "sites": kinds},
        "layers": layers,
        "ce": {k: round(v, 5) for k, v in ce.items()},
        "ce_recovered": round(splice.recovered(ce["mean_ablated"], ce["spliced"], ce["model"]), 5),
        "ce_recovered_random": round(splice.recovered(ce["mean_ablated"], ce["spliced_random"], ce["model"]), 5),
        "bleu": {k: round(float(v["bleu"]), 3) for k, v in scored.items()},
        "chrf": {k: round(float(v["chrf"]), 3) for k, v in scored.items()},
        "translations": [{"source": p.src, "model": a, "spliced": b}
                         for p, a, b in zip(list(pairs)[:len(sents)], own, with_dictionaries)][:20],
    }


def _site_report(result: dict) -> str:
    return _layer_line(result["layer"])


def _layer_line(row: dict) -> str:
    line = (f"{row['site']:24s} FVE {row['fve']:.3f} (random {row['fve_random']:.3f}"
            + (f", linear map {row['fve_linear']:.3f}" if "fve_linear" in row else "") + ")"
            f"  L0 {row['l0']:.1f}  dead {row['dead_fraction']:.1%}  busiest {row['max_density']:.1%}")
    if "skip" in row:
        line += "  skip" if row["skip"] else "  no skip"
    if "max_density_without_skip" in row:
        line += (f" (without it the busiest {row['max_density_without_skip']:.1%} after "
                 f"{row.get('without_skip_steps', '?')} steps)")
    return line


def report(result: dict) -> str:
    lines = [_layer_line(row) for row in result["layers"]]
    if "ce_recovered" in result:
        ce, bleu = result["ce"], result["bleu"]
        lines += [f"CE per target token: model {ce['model']:.3f}, every {result['settings'].get('sites', 'ffn')} site "
                  f"spliced {ce['spliced']:.3f} "
                  f"(random {ce['spliced_random']:.3f}), mean-ablated {ce['mean_ablated']:.3f}",
                  f"CE recovered {result['ce_recovered']:.3f} (random {result['ce_recovered_random']:.3f})",
                  f"greedy BLEU over {result['settings']['sentences']} sentences: model {bleu['model']:.2f}, "
                  f"dictionaries spliced {bleu['spliced']:.2f}"]
    return "\n".join(lines)


TRAIN = Study("features train", run_train, TRAIN_KEYS, report, TRAIN_STAGES)
EVALUATE = Study("features evaluate", run_evaluate, EVALUATE_KEYS, report, EVALUATE_STAGES)


SITE = Study("features-site", run_site, SITE_KEYS, _site_report, SITE_STAGES)
