"""Where the project lives on disk: the one fact every floor may need (the shipped checkpoints, the gold
sets and the default runs and data folders are found from it); and where a model lives (model_folder_of),
which no command writes into."""
from __future__ import annotations

import os
from pathlib import Path

from explorer.files.names import CONFIG, WEIGHTS

REPO_ROOT = Path(__file__).resolve().parents[2]     # the folder holding explorer/ (a checkout or an install)


def model_folder_of(path: str | os.PathLike) -> Path | None:
    """The model folder (config.json beside model.safetensors) that is `path` or holds it, symlinks
    followed; None when there is none: nothing a command writes may land there."""
    start = Path(os.path.realpath(path))
    return next((f for f in (start, *start.parents) if (f / CONFIG).is_file() and (f / WEIGHTS).is_file()), None)
