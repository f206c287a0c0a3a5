"""Every file and folder name the project writes or reads by name, in one place.

Why one module on the ground floor: a name is a fact shared by the code that writes a file and the code
that reads it back, often in different packages (a trainer writes status.json, the app polls it; a
converter writes config.json, the recovery of an interrupted swap looks for it). Written once here,
a renamed file cannot leave a reader behind. Each group says which format it belongs to; the Hugging
Face Marian names are that format's, not ours, and are listed because our export writes them and our
import reads them.
"""
from __future__ import annotations

# A checkpoint directory (explorer/store/checkpoint.py)
CONFIG = "config.json"                   # the model's shape and the checkpoint's metadata
WEIGHTS = "model.safetensors"
CARD = "card.json"                       # the model card: data, licence, scores
TRAINER_STATE = "trainer_state.pt"       # optimizer and schedule, for resuming
TEST_SPLIT = "test.tsv"                  # the held-out pairs the checkpoint was scored on

# The project's sentencepiece tokenizer (explorer/text/tokenizer.py): one joint model or one per side
JOINT_TOKENIZER, SRC_TOKENIZER, TGT_TOKENIZER = "tokenizer.model", "src.model", "tgt.model"

# A training run directory (explorer/store/run_files.py, explorer/training/)
RUN_STATUS = "status.json"
RUN_METRICS = "metrics.jsonl"
RUN_CONFIG = "train_config.json"
RUN_LOG = "train.log"
RUN_LOCK = "trainer.lock"                # held by the trainer for as long as it runs
RUN_TOKENIZER = "tokenizer"              # folder
RUN_CHECKPOINTS = "checkpoints"          # folder of step_<N> checkpoint directories
RUN_MARKER = ".explorer-run.json"        # left by the trainer in every run directory it writes

# The repository's folder of shipped checkpoints
SHIPPED = "checkpoints"

# The runs directory's folders that are not runs, and its own lock
UPLOADS = "uploads"                      # uploaded training pairs, <hash>.tsv with <hash>.name
HEADS = "heads"                          # the head lab's results, <weights sha>-<settings hash>.json
ALIGN = "align"                          # the alignment scorecard's results, named as HEADS' are
SEARCH = "search"                        # the beam-size curve's results (the Search page), named the same way
GRAPHS = "graphs"                        # the Graphs page's attribution graphs, named the same way
GROUNDING = "grounding"                  # training-word indexes by dataset (also in the shipped folder)
GRADIENT_STORE_SUFFIX = ".gradients.safetensors"   # in GROUNDING: <dataset key>-<weights sha> + this
STATE_MAP_SUFFIX = ".states.safetensors"           # in GROUNDING (shipped or runs): the encoder states' map
FEATURES = "features"                    # dictionaries: FEATURES/<weights sha>/<site>/{FEATURES_KINDS}/
FEATURES_KINDS = ("trained", "random")   # a site's dictionary and its random-decoder baseline
POISON_DEMO = "poison-demo"              # the poisoned-pairs demonstration's default --out (its two runs inside)
# The folders the app writes into the runs directory that are not runs, and what each holds: no run may take
# one's name (training.jobs), and no analysis writes its --out into one (store.output_dirs.in_app_store).
RUNS_STORES = {UPLOADS: "uploaded training data", HEADS: "the head lab's results",
               ALIGN: "the alignment scorecard's results", SEARCH: "the Search page's beam-size curves",
               GRAPHS: "the Graphs page's attribution graphs", GROUNDING: "the training-word indexes",
               FEATURES: "the feature dictionaries (transcoders)", POISON_DEMO: "the poisoned-pairs demonstration"}
LAUNCH_LOCK = ".launch.lock"             # one trainer launch at a time across app processes
UPLOAD_SUFFIX = ".tsv"
UPLOAD_NAME_SUFFIX = ".name"             # beside an upload: the uploaded file's own name
UPLOAD_DEFAULT_NAME = "upload.tsv"       # the name shown when an upload's own is unusable

# A built corpus (explorer/data/splits.py)
DATA_META = "meta.json"

# What a command writes unless told otherwise
HEAD_LAB_OUT = "head_lab.json"           # python -m explorer heads
ALIGNMENT_OUT = "alignment.json"         # python -m explorer align
CONTRIBUTIONS_OUT = "contributions.json" # python -m explorer contributions
LENS_OUT = "lens.json"                   # python -m explorer lens
PATCHING_OUT = "patching.json"           # python -m explorer patch
SEARCH_OUT = "search.json"               # python -m explorer search
GROUNDING_OUT = "grounding.json"         # python -m explorer grounding
FEATURES_OUT = "features.json"           # python -m explorer features train|evaluate
GRAPH_OUT = "graph.json"                 # python -m explorer graph
POISON_FILES = ("poisoned.tsv", "clean.tsv", "report.json")   # python -m explorer poison, in its --out

# The marker a converter leaves in its output directory (explorer/store/output_dirs.py)
OUTPUT_MARKER = ".explorer-output.json"
# In a directory being built beside its target until it is swapped in (explorer/files/atomic.py)
PARTIAL = ".explorer-partial"

# A Hugging Face Marian directory (explorer/interop/, explorer/text/vocab_tokenizer.py)
HF_CONFIG = "config.json"
HF_GENERATION_CONFIG = "generation_config.json"
HF_TOKENIZER_CONFIG = "tokenizer_config.json"
HF_README = "README.md"
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")         # preferred first
MARIAN_SRC_SPM, MARIAN_TGT_SPM = "source.spm", "target.spm"
MARIAN_VOCAB, MARIAN_TGT_VOCAB = "vocab.json", "target_vocab.json"
# M2M100 / NLLB: one sentencepiece model (+ M2M100's vocab.json, MARIAN_VOCAB's name); the hub's tokenizer.json
# (NLLB) is read for its language tokens' ids; languages.json is ours: the language tokens and their ids
MULTILINGUAL_SPM, HF_TOKENIZER_JSON, MULTILINGUAL_LANGUAGES = "sentencepiece.bpe.model", "tokenizer.json", "languages.json"

# A dictionary (transcoder) folder in SAELens's format (explorer/studies/features/files.py)
SAE_CFG, SAE_WEIGHTS = "cfg.json", "sae_weights.safetensors"
# Beside a trained dictionary: where each feature fires in the training pairs (features/contexts.py), and
# the app's one-site job's result (features/job.py)
FEATURE_CONTEXTS = "contexts.safetensors"
FEATURE_SITE_OUT = "site.json"
