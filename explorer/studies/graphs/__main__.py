"""`python -m explorer graph CHECKPOINT --text SOURCE [--target TEXT] --position K [--foil WORD] --out FILE.json`:
how one translated word was made, an attribution graph through cross-attention.

The model's FFNs replaced by the checkpoint's dictionaries (trained with `python -m explorer features
train CHECKPOINT`), every attention pattern and LayerNorm scale held at the sentence's values, error nodes
making it exact (docs/GRAPHS.md); the graph of output K (0-based; the decoder has read the start id and
outputs 0..K-1) of the forced --target, or of the model's own greedy translation, pruned to the nodes and
edges carrying --node-threshold and --edge-threshold of the influence on the logit (minus the --foil's).
The JSON is circuit-tracer's graph format (schema version 1: metadata, qParams, nodes, links) with this
project's keys beside it: logit_error, replacement_logit_error, top_source_position, position_influence,
scores (replacement, completeness), counts.

Every argument is checked before the checkpoint is loaded (counts and thresholds within
explorer.studies.graphs.job.RANGES, an --out that can be written); a missing or mismatched dictionary is
refused in one line that names the command making it.
"""
from __future__ import annotations

import sys
from typing import Callable

from explorer.files.names import GRAPH_OUT
from explorer.store.checkpoint import CheckpointError
from explorer.store.run_paths import RunsDirError, runs_root
from explorer.studies.common.command import add_checkpoint_languages, add_out_and_device, finish, open_checkpoint, \
    parse_checked, refuse, setting, settings_from, study_parser
from explorer.studies.graphs.job import GRAPH, RANGES, GraphSettings

# (model, weights sha256) -> {FFN site: transcoder}; raises ValueError (one line) when one is missing
Dictionaries = Callable[[object, str], dict]


def trained_dictionaries(model, weights_sha256: str) -> dict:
    """{FFN site: its trained transcoder}, as `python -m explorer features train` keeps them under runs/;
    DictionaryUnusable (a ValueError, one line) when one is missing, damaged or made for other weights."""
    from explorer.studies.features.job import load_all

    return {site: kinds["trained"] for site, kinds in load_all(model, weights_sha256, which=("trained",)).items()}


def build_parser():
    parser = study_parser("python -m explorer graph", __doc__)
    parser.add_argument("--text", required=True, help="the source sentence")
    parser.add_argument("--target", default=None, help="a forced translation (default: the model's greedy output)")
    parser.add_argument("--foil", default=None, help="a word: explain logit(output K) - logit(the word's first piece)")
    setting(parser, GraphSettings, "position", "the output position K explained, 0-based", ranges=RANGES)
    setting(parser, GraphSettings, "node_threshold", "share of the logit's influence the kept nodes hold",
            ranges=RANGES, type=float)
    setting(parser, GraphSettings, "edge_threshold", "share of the influence the kept edges hold", ranges=RANGES,
            type=float)
    setting(parser, GraphSettings, "batch", "targets per backward pass", ranges=RANGES)
    add_out_and_device(parser, GRAPH_OUT)
    add_checkpoint_languages(parser)
    return parser


def main(argv: list[str] | None = None, dictionaries: Dictionaries | None = None) -> int:
    """The command; `dictionaries` reads the checkpoint's transcoders (default: trained_dictionaries)."""
    args = parse_checked(build_parser(), list(sys.argv[1:] if argv is None else argv))
    if args is None:
        return 2
    try:
        settings = settings_from(args, GraphSettings)
    except ValueError as err:                      # a threshold outside 0..1
        return refuse(str(err))
    if args.target is not None and not args.target.strip():     # it explained the greedy output instead
        return refuse("--target is empty: give the translation to explain, or leave --target out for the "
                      "model's own greedy translation")
    dictionaries = dictionaries or trained_dictionaries
    try:
        ckpt = open_checkpoint(args)
    except (CheckpointError, ValueError) as err:  # a language missing, unknown or asked of a one-pair model
        return refuse(str(err))
    try:
        runs_root()                     # where the dictionaries are: a setting naming a file is said as itself
    except RunsDirError as err:
        return refuse(str(err))
    try:
        transcoders = dictionaries(ckpt.model, ckpt.meta.get("weights_sha256", ""))
    except ValueError as err:
        return refuse(f"{err} (python -m explorer features train {args.checkpoint} makes them)")
    return finish(GRAPH, args.out, ckpt.model, ckpt.tokenizer, args.text, transcoders, settings, meta=ckpt.meta,
                  target=args.target, foil=args.foil)


if __name__ == "__main__":
    sys.exit(main())
