"""The app server's memory with hostile files in its models folder, beside the same server on a clean one.

    python -m benchmarks hostile-models [--sessions 4] [--seconds 75]

Three copies of numbers-en-de in a models folder ($EXPLORER_MODELS_DIR), each with one file made a
10 GiB sparse file (8 KB on disk): config.json, card.json, tokenizer.model. Before the bounded reader
(explorer/files/user_files.py) one such card.json took a server from 0.5 to 4 GB in ten seconds, again
at every listing. A server is started on that folder and on a clean copy of it (the reference, in the
same process, one after the other); each is opened by --sessions sessions on the first page and on the
Checkpoints page, and watched for --seconds (the listing is read again every 30 s). Printed: each
server's peak resident memory side by side, their ratio, the damaged listing's lines, and any traceback
in the server's log.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks import browser as driver
from benchmarks.load_server import Monitor
from benchmarks.streamlit_client import Session
from explorer.store.catalog import list_checkpoints
from explorer.store.run_paths import RUNS_ENV, shipped_root

HOSTILE = ("config.json", "card.json", "tokenizer.model")
SPARSE_BYTES = 10 << 30


def models_folder(root: Path, hostile: bool) -> Path:
    folder = root / ("hostile" if hostile else "clean")
    for name in HOSTILE:
        copy = shutil.copytree(shipped_root() / "numbers-en-de", folder / f"big-{name}")
        if hostile:
            (copy / name).unlink()
            with open(copy / name, "wb") as f:
                f.truncate(SPARSE_BYTES)
    return folder


def watch(folder: Path, tmp: Path, sessions: int, seconds: float) -> dict:
    env = {RUNS_ENV: str(tmp / "runs"), "EXPLORER_MODELS_DIR": str(folder)}
    log = tmp / f"streamlit-{folder.name}.log"
    with driver.streamlit_server("app.py", env=env, log=log, wait=240) as server, Monitor(server.proc.pid) as mon:
        opened = []
        for _ in range(sessions):
            sess = Session(server.url)
            sess.connect()
            sess.open("/")
            sess.navigate("checkpoints")
            opened.append(sess)
        time.sleep(seconds)
        for sess in opened:
            sess.close()
    summary = mon.summary()
    summary["tracebacks"] = log.read_text(errors="replace").count("Traceback")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks hostile-models", description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=4, help="sessions opening the app (default 4)")
    parser.add_argument("--seconds", type=float, default=75.0, help="how long each server is watched (default 75)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hostile-models-") as tmp:
        tmp = Path(tmp)
        folders = {kind: models_folder(tmp, kind == "hostile") for kind in ("clean", "hostile")}
        listed = [i for i in list_checkpoints(folders["hostile"]) if i.error]
        print(f"{len(listed)} of {len(HOSTILE)} hostile checkpoints listed as damaged:")
        for info in listed:
            print(f"  {info.path.name}: {info.error}")
        rows = {kind: watch(folder, tmp, args.sessions, args.seconds) for kind, folder in folders.items()}
    print(f"\n{'server':<10}{'start MB':>10}{'peak MB':>10}{'end MB':>10}{'tracebacks':>12}")
    for kind, row in rows.items():
        print(f"{kind:<10}{row['rss_start_mb']:>10.0f}{row['rss_peak_mb']:>10.0f}{row['rss_end_mb']:>10.0f}"
              f"{row['tracebacks']:>12}")
    ratio = rows["hostile"]["rss_peak_mb"] / max(rows["clean"]["rss_peak_mb"], 1.0)
    print(f"peak, hostile / clean: {ratio:.2f}x ({args.sessions} sessions, {args.seconds:.0f} s each)")
    return 0 if len(listed) == len(HOSTILE) and not rows["hostile"]["tracebacks"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
