"""Every relative link in README.md and docs/*.md leads to a file inside the repository (a
clone has nothing outside it), and to a heading that exists when it names one; the contract,
docs/semantics.md, is linked from the README and from ``xroute explain --help``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from xroute.cli import cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and [text](target "title"), not images' data URIs; code spans are removed first.
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


def links(page: Path) -> list[str]:
    return LINK.findall(CODE.sub("", page.read_text(encoding="utf-8")))


def relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE)


def anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to dashes, repeats -1, -2."""
    seen: dict[str, int] = {}
    found = set()
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


CASES = [(page, target) for page in PAGES for target in links(page) if relative(target)]


def test_the_pages_have_links():
    assert len(PAGES) >= 5 and len(CASES) >= 10


@pytest.mark.parametrize(
    "page,target", CASES, ids=[f"{p.relative_to(ROOT)}->{t}" for p, t in CASES]
)
def test_relative_link_resolves_inside_the_repository(page: Path, target: str) -> None:
    path, _, anchor = target.partition("#")
    resolved = (page.parent / path).resolve() if path else page
    assert resolved.is_relative_to(ROOT), f"{page.name}: {target} leaves the repository"
    assert resolved.exists(), f"{page.name}: {target} does not exist"
    if anchor and resolved.suffix == ".md":
        assert anchor in anchors(resolved), f"{page.name}: {target}: no heading #{anchor}"


def test_the_contract_is_linked():
    readme = links(ROOT / "README.md")
    assert any(t.split("#")[0] == "docs/semantics.md" for t in readme)
    assert not any("SEMANTICS.md" in t for t in readme)
    help_text = CliRunner().invoke(cli, ["explain", "--help"]).output
    assert "docs/semantics.md" in help_text
