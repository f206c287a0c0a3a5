"""`python -m explorer features train|evaluate CHECKPOINT [--sites ffn|resid|all] [--sentences FILE] --out
FILE.json`: learned features for every FFN of a checkpoint (TopK transcoders, with a linear skip where
the plain one turns dense: --skip), or for every layer's
residual stream (TopK sparse autoencoders: --sites resid), or both (all), and how much of the model they
carry.

train: a dictionary and its random-decoder baseline per site, trained on rows from the checkpoint's own
training pairs, kept under runs/features/<weights sha>/ (SAELens's format), each scored on rows from the
development pairs; the JSON lists every site's fraction of variance explained (beside the random
baseline's and, for a transcoder, a linear map's), L0, dead latents and the busiest latent's density.

evaluate: the kept dictionaries on the first --first pairs of FILE (one source sentence per
line, or a TSV with a `source` column and optionally a `target` one; without a target the decoder reads,
and BLEU compares with, the model's own greedy output) or of the checkpoint's held-out pairs: per site
the same figures, then `ce_recovered` (every site of --sites replaced by its dictionary at once,
against mean ablation) and its random baseline's, and greedy BLEU with the dictionaries spliced in beside the model's.

Every argument is checked before the checkpoint is loaded (counts within
explorer.studies.features.job.RANGES, a readable FILE, an --out that can be written); a missing or
mismatched dictionary is refused in one line (run `train` first).
"""
from __future__ import annotations

import argparse
import sys
from types import SimpleNamespace

from explorer.data import load_corpus
from explorer.files.names import FEATURES_OUT
from explorer.files.user_files import UserFileError
from explorer.store.checkpoint import CheckpointError
from explorer.store.run_paths import runs_root
from explorer.studies.common.command import add_checkpoint_languages, add_out_and_device, checkpoint_and_held_out, \
    finish, open_checkpoint, parse_checked, refuse, setting, settings_from, study_parser
from explorer.studies.common.source_file import read_sentences
from explorer.studies.features.files import DictionaryUnusable
from explorer.studies.features.job import EVALUATE, RANGES, SKIP_MODES, TRAIN, FeatureSettings, load_all
from explorer.studies.features.sites import KINDS, all_sites
from explorer.studies.common.training_data import NoTrainingData, dataset_of, training_pairs

ACTIONS = ("train", "evaluate")
SITE_KINDS = (*KINDS, "all")


def build_parser(action: str):
    parser = study_parser(f"python -m explorer features {action}", __doc__)
    parser.add_argument("--sites", choices=SITE_KINDS, default="ffn",
                        help="ffn: a transcoder per FFN; resid: an SAE per layer's residual stream; all: both "
                             "(default ffn)")
    if action == "train":
        for name, said in (("width", "latents per transcoder"), ("k", "active latents per token (transcoders)"),
                           ("sae_width", "latents per residual-stream SAE (0: twice the model's width)"),
                           ("sae_k", "active latents per token (SAEs)"),
                           ("steps", "Adam steps per dictionary"), ("batch", "rows per step"),
                           ("rows", "training rows per site"), ("held_rows", "held-out rows per site"),
                           ("seed", "the random seed")):
            setting(parser, FeatureSettings, name, said, ranges=RANGES)
        for kind, site in (("", "transcoders"), ("sae_", "SAEs")):
            setting(parser, FeatureSettings, kind + "aux_loss_coefficient", f"AuxK ({site}): the weight of the dead "
                    "latents' auxiliary loss (Gao et al. 2024; 0: off; the paper's 1/32 is 0.03125)", ranges=RANGES,
                    type=float)
            setting(parser, FeatureSettings, kind + "dead_feature_window", f"AuxK ({site}): steps without firing "
                    "before a latent counts as dead", ranges=RANGES)
        setting(parser, FeatureSettings, "skip", "the FFNs' transcoders' linear skip (and so their random "
                "baselines'): always, never, or auto: a plain TopK transcoder unless one of its features fires on "
                "more than half the held-out tokens, then the skip transcoder (docs/FEATURES.md)", choices=SKIP_MODES)
    else:
        parser.add_argument("--sentences", dest="sentences_file", metavar="FILE",
                            help="one source sentence per line, or a TSV with a 'source' (and 'target') column "
                                 "(default: the checkpoint's held-out pairs)")
        setting(parser, FeatureSettings, "sentences", "the first N pairs", ranges=RANGES, flag="--first")
        setting(parser, FeatureSettings, "held_rows", "rows per site scored", ranges=RANGES)
    add_out_and_device(parser, FEATURES_OUT)
    add_checkpoint_languages(parser)
    return parser


def door_parser() -> argparse.ArgumentParser:
    """What `python -m explorer features --help` prints: the two actions (each has its own --help)."""
    parser = argparse.ArgumentParser(
        prog="python -m explorer features", description=__doc__.split("\n")[0],
        usage="python -m explorer features {train,evaluate} CHECKPOINT [options]  (ACTION --help: its options)")
    parser.add_argument("action", choices=ACTIONS)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        door_parser().parse_args(["--help"])                  # prints the usage, exits 0
    if not argv or argv[0] not in ACTIONS:
        return refuse(f"say what to do first: python -m explorer features {{{'|'.join(ACTIONS)}}} CHECKPOINT ...")
    action, rest = argv[0], argv[1:]
    args = parse_checked(build_parser(action), rest)
    if args is None:
        return 2
    try:
        settings = settings_from(args, FeatureSettings)
    except ValueError as err:                       # k wider than the dictionary
        return refuse(str(err))
    if action == "train":
        try:
            runs_root()                 # where the dictionaries go: a setting naming a file, said before the work
            ckpt = open_checkpoint(args)
            train, held = training_pairs(ckpt.meta), load_corpus(dataset_of(ckpt.meta)).dev
        except (CheckpointError, NoTrainingData, ValueError, OSError) as err:
            return refuse(str(err))
        if not held:
            return refuse(f"{ckpt.name}: its corpus has no development pairs to score the dictionaries on")
        try:                            # each site's sizes (a stream's width is its model's): before any work
            for site in all_sites(ckpt.model, args.sites):
                settings.train_settings(site, ckpt.model.cfg.d_model)
        except ValueError as err:
            return refuse(str(err))
        return finish(TRAIN, args.out, ckpt.model, ckpt.tokenizer, train, held, settings, meta=ckpt.meta,
                      kinds=args.sites)
    forced = "reference"
    if args.sentences_file:
        try:
            sources, refs = read_sentences(args.sentences_file)
        except (UserFileError, ValueError) as err:
            return refuse(f"--sentences {err}")
        forced = "reference" if refs is not None else "output"
        pairs = [SimpleNamespace(src=s, tgt=t) for s, t in zip(sources, refs or [""] * len(sources))]
        try:
            ckpt = open_checkpoint(args)
        except (CheckpointError, ValueError) as err:
            return refuse(str(err))
    else:
        loaded = checkpoint_and_held_out(args.checkpoint, args.device, args.src_lang, args.tgt_lang)
        if loaded is None:
            return 2
        ckpt, pairs = loaded
    try:
        load_all(ckpt.model, ckpt.meta.get("weights_sha256", ""), kinds=args.sites)     # refused before any work
    except DictionaryUnusable as err:
        return refuse(f"{err} (python -m explorer features train {args.checkpoint} --sites {args.sites} makes them)")
    return finish(EVALUATE, args.out, ckpt.model, ckpt.tokenizer, pairs, settings, meta=ckpt.meta, forced=forced,
                  kinds=args.sites)


if __name__ == "__main__":
    sys.exit(main())
