"""The shape of the code base: the library's folders, no import circles, nothing copied in, nothing
that speaks of a development machine."""
from __future__ import annotations

import ast
import re
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
    assert {"text", "model", "inspection", "decoding", "data", "store", "training", "evaluation", "plots",
            "runtime", "files"} <= folders


# The library's floors, lowest first: a package imports only from its own floor or lower ones, so a new
# analysis lands above what it uses and nothing below has to know it (config/, the
# configs and their bounds, is a floor of its own; the command entries train.py, evaluate.py, convert.py sit on top). The
# analyses stand side by side in studies/ (see STUDIES_ALLOWED below); nothing in the library reads
# them but the command door (explorer/__main__.py): the app does.
FLOORS = ("runtime", "files", "text", "config", "model", "inspection", "decoding", "data", "store",
          "evaluation", "training", "studies", "interop", "plots")
ENTRIES = ("train", "evaluate", "convert", "__init__", "__main__")


def graph_of(files: list[Path], known: set[str]) -> dict[str, set[str]]:
    graph = {module_name(f): imports_of(f, known) - {module_name(f)} for f in files}
    # a package's __init__ may import its own modules; a module importing its package is no circle
    for name, deps in graph.items():
        graph[name] = {d for d in deps if not name.startswith(d + ".")}
    return graph


def circles_in(graph: dict[str, set[str]]) -> list[list[str]]:
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
    return circles


def floor_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") else module


def test_no_import_circles_in_the_library():
    files = sorted(LIBRARY.rglob("*.py"))
    assert not circles_in(graph_of(files, {module_name(f) for f in files}))


def test_every_library_package_has_a_floor_and_imports_only_downward():
    files = sorted(LIBRARY.rglob("*.py"))
    graph = graph_of(files, {module_name(f) for f in files})
    upward = []
    for module, deps in graph.items():
        here = floor_of(module)
        if here in ENTRIES or module == "explorer":
            continue
        assert here in FLOORS, f"{module}: explorer/{here} has no floor in FLOORS (add it where it belongs)"
        for dep in deps:
            there = floor_of(dep)
            if there != here and FLOORS.index(there) > FLOORS.index(here):
                upward.append(f"{module} -> {dep}")
    assert upward == []


# Inside studies/: common/ is the base, each other folder one analysis that imports common/ and lower
# floors, never another analysis; the exceptions: contributions reading align's aligners (its alignment
# scorecard scores ALTI+ with them), and graphs reading the features study's dictionaries (an attribution
# graph replaces every FFN by its transcoder).
STUDIES_ALLOWED = {("contributions", "align"), ("graphs", "features")}


def study_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "studies" else None


def test_no_analysis_imports_another_and_the_base_imports_none():
    files = sorted((LIBRARY / "studies").rglob("*.py"))
    every = sorted(LIBRARY.rglob("*.py"))
    graph = graph_of(files, {module_name(f) for f in every})
    crossing = []
    for module, deps in graph.items():
        here = study_of(module)
        for dep in deps:
            there = study_of(dep)
            if here and there and there != here and there != "common" and (here, there) not in STUDIES_ALLOWED:
                crossing.append(f"{module} -> {dep}")
    assert crossing == []
    analyses = {p.name for p in (LIBRARY / "studies").iterdir() if (p / "__init__.py").is_file()} - {"common"}
    assert {"heads", "align", "contributions", "lens", "patching", "contrastive", "grounding"} <= analyses


def test_the_library_never_imports_the_app_or_streamlit():
    found = []
    for path in sorted(LIBRARY.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in ("webapp", "streamlit")]
    assert found == []


def test_no_import_circles_in_the_app():
    files = [ROOT / "app.py", *sorted((ROOT / "webapp").rglob("*.py"))]
    known = {module_name(f) for f in files} | {"webapp"}
    graph = graph_of(files, known)
    for name, deps in graph.items():          # `from webapp import state` names the module webapp.state
        graph[name] = {d for d in deps if d != "webapp"}
    assert not circles_in(graph)


def test_no_third_party_scripts_are_tracked():
    assert [f for f in tracked() if f.endswith((".js", ".css")) or "/static/" in f] == []


def test_nothing_speaks_of_a_development_machine_or_an_issue_tracker():
    out = subprocess.run(["git", "grep", "-n", "-I", "-E", r"/work/|/home/[a-z]|/root/|[Ii]ssue #?[0-9]+"],
                         cwd=ROOT, capture_output=True, text=True)
    this = Path(__file__).resolve().relative_to(ROOT).as_posix()
    hits = [line for line in out.stdout.splitlines() if not line.startswith(this + ":")]
    assert hits == []


FILE_NAME = re.compile(r"^\.?[\w-]+(\.[\w-]+)*\.(json|jsonl|log|lock|tsv|safetensors|pt|bin|spm|model|md|name)$")


def test_every_file_name_the_library_writes_or_reads_is_written_once_in_names():
    """A file's name is shared by its writer and its readers: explorer/files/names.py holds each, so a
    renamed file cannot leave a reader behind. Any other string literal that looks like a file name fails."""
    names_module = LIBRARY / "files" / "names.py"
    found = []
    for path in sorted(LIBRARY.rglob("*.py")):
        if path == names_module:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and FILE_NAME.match(node.value):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == []
