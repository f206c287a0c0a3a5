"""The shape of the code base: the library's folders, no import circles, nothing copied in, nothing
that speaks of a development machine."""
from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "explorer"


def tracked() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Every explorer module `path` imports, at module level or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        found |= {n for n in names if n in known}
    return found


def test_the_library_is_folders_with_few_modules_beside_them():
    top = sorted(p.name for p in LIBRARY.glob("*.py"))
    assert len(top) <= 6, top
    folders = {p.name for p in LIBRARY.iterdir() if (p / "__init__.py").is_file()}
    assert {"text", "model", "inspection", "decoding", "data", "store", "training", "evaluation", "plots"} <= folders


def test_no_import_circles_in_the_library():
    files = sorted(LIBRARY.rglob("*.py"))
    known = {module_name(f) for f in files}
    graph = {module_name(f): imports_of(f, known) - {module_name(f)} for f in files}
    # a package's __init__ may import its own modules; a module importing its package is no circle
    for name, deps in graph.items():
        graph[name] = {d for d in deps if not name.startswith(d + ".")}
    circles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                circles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not circles, circles


def test_no_third_party_scripts_are_tracked():
    assert [f for f in tracked() if f.endswith((".js", ".css")) or "/static/" in f] == []


def test_nothing_speaks_of_a_development_machine_or_an_issue_tracker():
    out = subprocess.run(["git", "grep", "-n", "-I", "-E", r"/work/|/home/[a-z]|/root/|[Ii]ssue #?[0-9]+"],
                         cwd=ROOT, capture_output=True, text=True)
    this = Path(__file__).resolve().relative_to(ROOT).as_posix()
    hits = [line for line in out.stdout.splitlines() if not line.startswith(this + ":")]
    assert hits == []
