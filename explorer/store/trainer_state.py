"""A checkpoint's resume state (optimizer moments, step, data position) written so that it can be trusted:
loadable without pickle, and a write the disk refuses said as the OSError it is."""
from __future__ import annotations

from pathlib import Path

import torch


def save_trainer_state(state: dict, path: Path) -> None:
    """torch.save, then fail the save now (not at resume) if loading it would need pickle.

    Saved through a Python file object, so a write the disk refuses (full, over quota, over a file-size
    limit) is an OSError with its errno, which the trainer reports as a full disk to free and resume
    from: torch's writer wraps it in a RuntimeError ("unexpected pos ..."), unwrapped here. Only a state
    that cannot be pickled, or loaded back without pickle, is a ValueError about what the state holds."""
    try:
        with open(path, "wb") as f:
            torch.save(state, f)
        torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        cause, seen = exc, set()
        while cause is not None and id(cause) not in seen:     # the OSError raised, or wrapped by torch
            if isinstance(cause, OSError):
                raise cause from None
            seen.add(id(cause))
            cause = cause.__cause__ or cause.__context__
        raise ValueError("trainer_state must hold only tensors, numbers, strings, lists and dicts "
                         f"(it has to load with weights_only=True): {exc}") from None
