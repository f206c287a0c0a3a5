"""A checkpoint whose trainer state the disk refuses to hold (full, over quota, over a file-size limit) fails
with that OSError, which the trainer reports as a full disk to free before resuming, and never as a trainer
state holding something other than tensors and numbers (torch wraps the failed write in a RuntimeError)."""
from __future__ import annotations

import errno
import os
import sys
import textwrap
from pathlib import Path

import pytest

from support.waiting import run_watched

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 6 << 20                 # the weights (about 3.7 MB) fit under it, the 8 MB trainer state does not

WRITER = textwrap.dedent("""
    import errno, resource, sys
    sys.path[:0] = [{root!r}, {tests!r}]
    import torch
    from explorer.store.checkpoint import save_checkpoint
    from support.model_helpers import FakeTokenizer, make_model
    resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))   # Python ignores SIGXFSZ: writes fail EFBIG
    try:
        save_checkpoint(sys.argv[1], make_model(seed=1), FakeTokenizer(), meta={{"name": "x"}},
                        trainer_state={{"optimizer": {{"m": torch.zeros(2 << 20)}}, "step": 5}})
    except Exception as err:
        print(type(err).__name__, getattr(err, "errno", None), err)
    else:
        print("saved")
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="file-size limits as Linux sets them")
def test_a_trainer_state_over_the_file_size_limit_fails_as_the_write_it_is(tmp_path):
    script = WRITER.format(root=str(ROOT), tests=str(ROOT / "tests"), limit=LIMIT)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = run_watched([sys.executable, "-c", script, str(tmp_path / "ck")], "the checkpoint writer", env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip()
    assert "trainer_state must hold" not in out
    assert out.startswith(f"OSError {errno.EFBIG} "), out
    assert not (tmp_path / "ck").exists() and not any(tmp_path.iterdir())     # nothing half-written is left


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full, a device every write fails on")
def test_a_full_disk_at_the_trainer_state_is_no_space_left(tmp_path):
    import torch
    from explorer.store.trainer_state import save_trainer_state
    with pytest.raises(OSError) as caught:
        save_trainer_state({"m": torch.zeros(1 << 16), "step": 5}, Path("/dev/full"))
    assert caught.value.errno == errno.ENOSPC


def test_a_state_that_needs_pickle_is_still_named_as_such(tmp_path):
    from explorer.store.trainer_state import save_trainer_state
    with pytest.raises(ValueError, match="trainer_state must hold only tensors"):
        save_trainer_state({"thing": Path("x")}, tmp_path / "state.pt")
