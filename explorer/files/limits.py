"""How many bytes the project reads of each kind of file it did not just write itself, in one place.

Why: a file in a checkpoint or a run folder may be anything (a 10 GiB sparse card.json takes 8 KB on
disk, and reading it whole took a shared app server from 0.5 to 4 GB in ten seconds), and the listing
reads every checkpoint's files for every user every 30 s. Each bound is far above what the project
writes (the sizes in the comments), so a real file always fits; anything larger is refused before it is
read (explorer.files.user_files), and the checkpoint is listed as damaged with the reason.
"""
from __future__ import annotations

import re

JSON_BYTES = 1 << 20                # config.json, card.json, status.json, train_config.json, a --config
                                    # (the shipped ones: 1-2 KB; an import's card: under 10 KB)
TOKENIZER_BYTES = 64 << 20          # a sentencepiece model or Marian's vocab.json (ours: 0.4 MB;
                                    # OPUS-MT: ~1 MB spm, ~2 MB vocab)
TOKENIZER_VALUES = 2_000_000        # ... and the JSON values in a vocab.json or languages.json (user_files.
                                    # json_values_bound: two a piece; OPUS-MT's 58,101 pieces: ~116,000,
                                    # M2M100's 128,112: ~256,000); 63 MB of `[{},{},...]` took 4.4 GB to read
TOKENIZER_PIECES = 1 << 20          # ... and the pieces in a sentencepiece model, counted before sentencepiece
                                    # reads it (text.tokenizer.piece_count): the vocabulary bound (config.
                                    # checks.MODEL_LIMITS); 3.5M pieces in 60 MB took sentencepiece 1.5 GB
RESULT_BYTES = 128 << 20            # an analysis's result JSON read back, and refused as it is written
                                    # (atomic.write_result_atomic) (the largest measured: a Graphs page
                                    # result of a 35-piece Bible verse through random dictionaries, six prunings
                                    # with 382,000 links at 0.95: 68 MB; the head lab, search, alignment, lens,
                                    # a faithfulness part on the Bible: under 3 MB)
RESULT_VALUES = 6_000_000          # ... and the JSON values in it, counted by user_files.json_values_bound (that
                                    # graph: 4.6 million; read in 354 MB). json.loads takes up to ~80 bytes a
                                    # value: 100 MB of `{},{},...` took 2.7 GB. Within both bounds the worst
                                    # file measured (6 million values of one-key objects, then one string to
                                    # 128 MiB) took 0.9 GB to read
METRICS_TAIL_BYTES = 32 << 20       # the newest part of metrics.jsonl that is read (~150,000 records)
INDEX_BYTES = 32 << 20             # a training-word index, gzip'd (bible-es-en's: under 2 MB)
INDEX_JSON_BYTES = 128 << 20       # ... and what it may inflate to (bible-es-en's: about 8 MB)
PAIRS_BYTES = 64 << 20            # shipped training pairs, once decompressed (the Bible's: 8 MB)
STATE_MAP_BYTES = 64 << 20        # a state map, encoder or decoder (16,384 x 64 float16 + the basis: about 2.2 MB)
GRADIENT_BYTES = 512 << 20         # a training-data attribution store: pairs x 512 float16 (the Bible's: 29 MB;
                                   # 512 MB holds 524,288 training pairs)
CONTEXTS_BYTES = 64 << 20         # a dictionary's training contexts (1,024 latents x 20: about 0.3 MB)
DICTIONARY_BYTES = 256 << 20       # one site's transcoder weights (d=256, 1,024 latents in float32: 2.1 MB)


def whole_number(text: object, digits: int = 18) -> int | None:
    """`text` as a whole number when it is 1 to `digits` ASCII digits (spaces around allowed), else None.
    Why not str.isdigit(): it is True for "²" and other Unicode digits, which int() refuses, and for a
    run of 5,000 digits, which int() refuses too (and which no bound here needs)."""
    found = re.fullmatch(rf"\s*([0-9]{{1,{int(digits)}}})\s*", str(text))
    return int(found.group(1)) if found else None
