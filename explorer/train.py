"""`python -m explorer train`: the trainer's command line.

Parses the arguments (explorer.training.args), runs explorer.training.trainer.Trainer, and turns every
ending into an exit code with one line on stderr: 2 for a bad argument, 1 for a run refused at setup
(status.json already says why) or a crash mid-run (recorded as `failed` with the error first).
"""
from __future__ import annotations

import sys
import time

from explorer.data import DataError
from explorer.store.checkpoint import CheckpointError
from explorer.store.run_clearing import RunRefused
from explorer.training.args import parse_command
from explorer.training.memory import SetupRefused
from explorer.training.trainer import Trainer, record_status


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, resume, overwrite = parse_command(argv)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        trainer = Trainer(cfg, resume=resume, overwrite=overwrite)   # SystemExit (code 1) if the run is locked
    except (DataError, CheckpointError, SetupRefused, RunRefused) as err:   # status.json already says why
        print(f"error: {err}", file=sys.stderr)
        return 1
    try:
        return trainer.run()
    except Exception as err:  # an unexpected crash mid-run: `failed` with the error, not a stale `running`
        if trainer.dist.is_main:
            record_status(trainer.run_dir, state="failed", last_error=f"{type(err).__name__}: {err}",
                           updated=time.time())
        raise


if __name__ == "__main__":
    sys.exit(main())
