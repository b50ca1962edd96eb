"""Relative links in README.md and docs/*.md lead to files that exist (and to headings that exist,
for a ``#anchor``), and README.md links every docs page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """``text`` without code blocks and code spans (a link or heading there is not one)."""
    return CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", text)):
        s = slug(heading)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")  # GitHub numbers repeats
    return out


def broken_links(page: Path) -> list[str]:
    """Each relative link of ``page`` whose file, or heading, is missing."""
    bad = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            bad.append(f"{target}: no heading #{anchor} in {dest.name}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page):
    assert broken_links(page) == []


def test_readme_links_every_docs_page():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in LINK.findall(prose((ROOT / "README.md").read_text()))}
    assert [p.name for p in PAGES[1:] if p.resolve() not in linked] == []


def test_the_check_catches_broken_links(tmp_path):
    # Guards the tests above: a missing file, a missing heading, and links in code are skipped.
    (tmp_path / "B.md").write_text("# Scale out: Kubernetes\n\n## Tests\n\n## Tests\n")
    page = tmp_path / "A.md"
    page.write_text("[ok](B.md#scale-out-kubernetes) [ok](B.md#tests-1) [web](https://x.y/z) `[code](nope.md)`\n"
                    "```\n[block](nope.md)\n```\n[gone](C.md) [bad anchor](B.md#kubernetes) [self](#nowhere)\n")
    assert broken_links(page) == [f"C.md: no {tmp_path / 'C.md'}", "B.md#kubernetes: no heading #kubernetes in B.md",
                                  "#nowhere: no heading #nowhere in A.md"]
