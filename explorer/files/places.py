"""Where the project lives on disk: the one fact every floor may need (the shipped checkpoints, the gold
sets and the default runs and data folders are found from it)."""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]     # the folder holding explorer/ (a checkout or an install)
