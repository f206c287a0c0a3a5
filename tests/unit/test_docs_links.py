"""The documentation holds together: every relative link in README.md and docs/*.md leads to a file
that exists (and a `#anchor` to a heading of that file), and the README stays a front door (under
10 KB: the rest belongs in docs/)."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_BYTES = 10_240

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)          # fenced code blocks
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)            # http:, https:, mailto:, ...


def prose(text: str) -> str:
    """The text without code, where a `[x](y)` is not a link."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def links(path: Path) -> list[str]:
    return LINK.findall(prose(path.read_text(encoding="utf-8")))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_the_checked_files_exist():
    assert (ROOT / "README.md").is_file()
    names = {p.name for p in DOCS}
    for name in ("DESIGN.md", "DATA.md", "TEACHING.md", "RESEARCH.md", "PERFORMANCE.md", "INTEROP.md", "SECURITY.md"):
        assert name in names, name


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc):
    broken = []
    for target in links(doc):
        if EXTERNAL.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        dest = (doc.parent / unquote(path_part)).resolve() if path_part else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and dest.suffix == ".md" and unquote(anchor).lower() not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.relative_to(ROOT)}")
    assert not broken, f"{doc.relative_to(ROOT)}: " + "; ".join(broken)


def test_readme_links_the_docs():
    linked = {Path(t.partition("#")[0]).name for t in links(ROOT / "README.md")}
    for name in ("DESIGN.md", "DATA.md", "alignment_guidelines.md", "TEACHING.md", "RESEARCH.md",
                 "PERFORMANCE.md", "INTEROP.md", "SECURITY.md", "LICENSE", "CITATION.cff"):
        assert name in linked, f"README.md does not link {name}"


def test_readme_is_a_front_door():
    size = (ROOT / "README.md").stat().st_size
    assert size < README_MAX_BYTES, f"README.md is {size:,} bytes; move detail to docs/ (limit {README_MAX_BYTES:,})"


def test_slug_follows_github():
    assert slug("Researcher: the library API") == "researcher-the-library-api"
    assert slug("Alignment scorecard: is cross-attention a word alignment?") == \
        "alignment-scorecard-is-cross-attention-a-word-alignment"
    assert slug("Layout (one job per module)") == "layout-one-job-per-module"


def section(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    start = text.index(heading)
    following = text.find("\n## ", start + len(heading))
    return text[start:following if following > 0 else len(text)]


def titles_in_order(text: str, titles: list[str]) -> list[str]:
    """The page titles in the order the text first names each (bold or plain, whole words)."""
    pattern = {t: r"\s+".join(map(re.escape, t.split())) for t in titles}             # a title may wrap
    found = {t: m.start() for t in titles if (m := re.search(rf"(?<!\w){pattern[t]}(?!\w)", text))}
    return sorted(found, key=found.get)


def test_the_readme_and_the_teaching_guide_name_the_pages_in_the_lecture_order():
    """The page order is written once (webapp.lecture.PAGES_TABLE, which builds the sidebar); the README's
    list and the teaching guide's route and numbered list name every page in that order, so a page added
    or moved there cannot leave the docs behind."""
    from webapp.lecture import PAGES_TABLE

    titles = [p.title for p in PAGES_TABLE]
    readme = section(ROOT / "README.md", "## The pages, in lecture order")
    route = section(ROOT / "docs" / "TEACHING.md", "## The lecture route")
    chain, numbered = route.split("\n\n", 2)[1], "\n".join(re.findall(r"^\d+\. \*\*[^*]+\*\*", route, re.M))
    for where, text in (("README", readme), ("TEACHING route", chain), ("TEACHING list", numbered)):
        assert titles_in_order(text, titles) == titles, where
