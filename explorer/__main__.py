"""`python -m explorer <command> [arguments]` (or the `explorer` console script): one door to every command.

Each command is its module's own main(argv), so `python -m explorer train ...` and `python -m explorer
train ...` are the same program; `python -m explorer` alone lists them.
"""
from __future__ import annotations

import importlib
import sys

# command -> (module with main(argv), what it does); in the order a user meets them
COMMANDS = {
    "data": ("explorer.data.__main__", "build (or load) a corpus and summarise it: bible, numbers, a TSV"),
    "train": ("explorer.train", "train a model (a run directory under runs/)"),
    "evaluate": ("explorer.evaluation.command", "BLEU / chrF / exact match of a checkpoint, written to its card"),
    "convert": ("explorer.interop.cli", "import an OPUS-MT (Marian), M2M100 or NLLB-200 model; export to Hugging Face or CTranslate2"),
    "heads": ("explorer.studies.heads.__main__", "the head lab over a test set: roles, importance, pruning curves"),
    "align": ("explorer.studies.align.__main__", "the alignment scorecard: cross-attention and attributions against gold"),
    "contributions": ("explorer.studies.contributions.__main__", "ALTI+: each output token's source vs target-prefix share"),
    "lens": ("explorer.studies.lens.__main__", "what each layer knows: DecoderLens per encoder layer, logit lens per decoder layer"),
    "patch": ("explorer.studies.patching.__main__", "activation patching on minimal pairs: which activation carries a word"),
    "search": ("explorer.studies.contrastive.__main__", "the beam-size curve and exact search: search errors vs model errors"),
    "grounding": ("explorer.studies.grounding.__main__", "grounded or guessing: each sentence's translation and what its training data says"),
    "features": ("explorer.studies.features.__main__", "learned features: a transcoder per FFN (train), and what they carry (evaluate)"),
    "graph": ("explorer.studies.graphs.__main__", "how one translated word was made: an attribution graph through cross-attention"),
    "poison": ("explorer.studies.grounding.poison", "the poisoned-pairs demonstration: 20 bad pairs, found by attribution, undone"),
    "ship": ("explorer.store.ship", "turn a run's checkpoint into a shipped one (float16, with its test split)"),
    "showcase": ("explorer.evaluation.showcase", "choose and record the test pair the app opens on"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    return ("usage: python -m explorer <command> [arguments]   (or: explorer <command> ...)\n\ncommands:\n"
            + "\n".join(lines) + "\n\n`python -m explorer <command> --help` says more about one.")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    for stream in (sys.stdout, sys.stderr):        # a terminal of another encoding than UTF-8: a piece "▁" or
        if (getattr(stream, "encoding", "") or "").lower().replace("-", "") != "utf8" \
                and hasattr(stream, "reconfigure"):    # "fünf" printed as an escape, not a UnicodeEncodeError
            stream.reconfigure(errors="backslashreplace")
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"explorer: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    sys.argv = [f"python -m explorer {name}", *rest]          # for a parser that does not name its program
    try:
        module = importlib.import_module(COMMANDS[name][0])    # torch loads here: seconds to press Ctrl-C in
        result = module.main(rest)
    except KeyboardInterrupt:                  # Ctrl-C: one line, not a traceback (every file is written whole)
        print(f"stopped: {name} was interrupted before it finished; no file is left half-written", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
