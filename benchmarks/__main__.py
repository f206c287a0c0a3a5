"""Dispatcher: `python -m benchmarks <name> [args...]` runs benchmarks.<name>.main(args) (`-` in a name
stands for `_`: heads-load); e.g. `python -m benchmarks load` (N students at once, benchmarks/load.py);
`all` runs every benchmark module with its defaults; no name lists them. Helper modules (the Chromium
driver, the Streamlit protocol client) are not benchmarks."""
from __future__ import annotations

import importlib
import pkgutil
import sys

import benchmarks as package

HELPERS = ("browser", "streamlit_client")      # used by benchmarks (and tests/browser), not run themselves


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__)
                  if not m.name.startswith("_") and m.name not in HELPERS)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = available()
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: python -m benchmarks {{{'|'.join(names + ['all'])}}} [args...]")
        return 0 if argv else 2
    name, rest = argv[0].replace("-", "_"), argv[1:]                # heads-load = heads_load
    if name == "all":
        status = 0
        for each in names:
            module = importlib.import_module(f"benchmarks.{each}")
            if not hasattr(module, "main"):           # a helper module (browser.py: the Chromium driver)
                continue
            print(f"== {each} ==", flush=True)
            status = max(status, int(module.main(rest) or 0))
        return status
    if name not in names:
        print(f"unknown benchmark {name!r}; choose one of {names + ['all']}", file=sys.stderr)
        return 2
    return int(importlib.import_module(f"benchmarks.{name}").main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
