"""docs/DESIGN.md's map keeps up with the code: its Layout section names every library package and every
analysis, and no folder that is gone; its floors are the layout test's FLOORS, in order; its Commands
section names exactly the commands of `python -m explorer`, in the door's order. A package, an analysis
or a command added, moved or removed without its line in the document fails here."""
from __future__ import annotations

import re
from pathlib import Path

from explorer.__main__ import COMMANDS
from tests.unit.test_layout import FLOORS

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "DESIGN.md"
LIBRARY = ROOT / "explorer"

# A path the Layout names: from a top-level folder of the repository, up to a space, backtick, comma or
# bracket; `checkpoints/<name>/` and the like are placeholders, not paths.
PATH = re.compile(r"(?<![\w./$])((?:explorer|webapp|benchmarks|tests|gold|docs|checkpoints)/[\w./-]*)(?![\w./<-])")


def paths(text: str) -> set[str]:
    """Every repository path the text names (a sentence's full stop or comma after it left out)."""
    return {p.rstrip(".,") for p in PATH.findall(text)}


def section(heading: str) -> str:
    """The text of DESIGN.md's `## heading` section, up to the next `## ` heading."""
    text = DESIGN.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(heading)}\s*$", text, re.M)
    assert match, f"docs/DESIGN.md has no '## {heading}' section"
    following = re.search(r"^## ", text[match.end():], re.M)
    return text[match.end():match.end() + following.start() if following else len(text)]


def folder_paths(text: str) -> set[str]:
    """Every folder path (ending in /) under explorer/ the text names, without the trailing slash."""
    return {p.rstrip("/") for p in paths(text) if p.startswith("explorer/") and p.endswith("/")}


def test_the_layout_names_every_package_and_every_analysis():
    named = folder_paths(section("Layout (one job per module)"))
    packages = {f"explorer/{p.name}" for p in LIBRARY.iterdir() if (p / "__init__.py").is_file()}
    analyses = {f"explorer/studies/{p.name}" for p in (LIBRARY / "studies").iterdir()
                if p.is_dir() and not p.name.startswith(("_", "."))}
    missing = sorted((packages | analyses) - named)
    assert missing == [], f"docs/DESIGN.md's Layout does not name {missing}: add a line for each"


def test_every_path_the_layout_names_exists():
    layout = section("Layout (one job per module)")
    named = paths(layout)
    assert any(p.startswith("explorer/studies/") for p in named)         # the pattern finds the map's paths
    gone = sorted(p for p in named if not (ROOT / p).exists())
    assert gone == [], f"docs/DESIGN.md's Layout names paths that are not there: {gone}"


def test_the_floors_are_the_layout_tests_floors_in_order():
    found = re.findall(r"Floors, lowest first: `([^`]+)`", section("Layout (one job per module)"))
    assert len(found) == 1, "the Layout's rules list the floors once, as `Floors, lowest first: `a, b, ...``"
    assert tuple(name.strip() for name in found[0].split(",")) == FLOORS


def test_the_commands_section_names_every_command_of_the_door_once():
    listed = re.findall(r"^- `python -m explorer ([\w-]+)`", section("Commands"), re.M)
    assert listed == list(COMMANDS), "docs/DESIGN.md's Commands: one `- `python -m explorer X`` line per " \
                                     "entry of explorer/__main__.py's COMMANDS, in its order"


def test_the_map_catches_a_missing_line():
    """The checks above read what they are meant to: a package or command left out would be seen."""
    layout = section("Layout (one job per module)")
    assert "explorer/studies/lens" in folder_paths(layout)
    assert "explorer/studies/lens" not in folder_paths(layout.replace("explorer/studies/lens/", "lens"))
    assert paths("see checkpoints/<name>/, explorer/studies/<name>/ and explorer/plots/.") == {"explorer/plots/"}
