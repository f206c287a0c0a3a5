"""Dispatcher: `python -m benchmarks <name> [args...]` runs benchmarks.<name>.main(args) (`-` in a name
stands for `_`: heads-load); e.g. `python -m benchmarks load` (N students at once, benchmarks/load.py);
`all` runs every benchmark module with its defaults; no name lists them. A benchmark is a module with
a main(argv); the others are its helpers (the Chromium driver, the Streamlit protocol client, the GPU
check's stages, the load benchmark's parts) and are neither listed nor run."""
from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path

import benchmarks as package


def _has_main(name: str) -> bool:
    """Whether benchmarks/<name>.py defines main at its top level (read, not imported: some import torch)."""
    tree = ast.parse((Path(package.__path__[0]) / f"{name}.py").read_text())
    return any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body)


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__)
                  if not m.name.startswith("_") and not m.ispkg and _has_main(m.name))


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
            print(f"== {each} ==", flush=True)
            status = max(status, int(module.main(rest) or 0))
        return status
    if name not in names:
        print(f"unknown benchmark {name!r}; choose one of {names + ['all']}", file=sys.stderr)
        return 2
    return int(importlib.import_module(f"benchmarks.{name}").main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
