"""`python -m explorer data bible|numbers|<spec> [--data-dir data]`: build (or load) and summarise."""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from explorer.data import DataError, load_corpus
from explorer.data.splits import DEFAULT_SEED, default_data_dir
from explorer.files.places import model_folder_of


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer data", description=__doc__)
    parser.add_argument("spec", help="bible | numbers | file.tsv | src.txt,tgt.txt | hf:<dataset>[:config]")
    parser.add_argument("--data-dir", default=None, help="cache directory (default: $EXPLORER_DATA_DIR, else data/)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help="the split's seed; another than the default is cached beside it (<name>-seed<N>)")
    parser.add_argument("--rebuild", action="store_true", help="ignore the cache and rebuild")
    args = parser.parse_args(argv)
    data_dir = args.data_dir or default_data_dir()
    folder = model_folder_of(data_dir)
    if folder is not None:                    # a model would gain folders the catalog and a re-export then read
        print(f"error: --data-dir {data_dir} is inside the model folder {folder}; name a folder outside it",
              file=sys.stderr)
        return 2
    start = time.perf_counter()
    try:
        if args.rebuild:
            load_corpus(args.spec, args.data_dir, args.seed, use_cache=False)
        corpus = load_corpus(args.spec, args.data_dir, args.seed)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - start
    sizes = corpus.sizes()
    print(f"{corpus.name} ({corpus.src_lang} -> {corpus.tgt_lang}) in {elapsed:.1f} s, "
          f"cached under {data_dir}/")
    print("  " + ", ".join(f"{k} {v:,}" for k, v in sizes.items()))
    if note := corpus.overlap_warning():
        print(note, file=sys.stderr)
    every = corpus.train + corpus.dev + corpus.test
    for side in ("src", "tgt"):
        words = [len(getattr(p, side).split()) for p in every]
        print(f"  {side}: mean {statistics.mean(words):.1f} words, max {max(words)}")
    for p in corpus.train[:3]:
        print(f"  [{p.ref}] {p.src}\n      -> {p.tgt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
