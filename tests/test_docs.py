"""The documentation site's sources, checked without building it (`make docs` builds it, strictly, in `make test`):
these hold in the fast tier too."""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
INCLUDE = re.compile(r'^--8<-- "([^":]+)((?::\d*){0,2})"$', re.M)


class _Loader(yaml.SafeLoader):
    """mkdocs.yml with its tags (`!relative`) read as nothing: only the nav matters here."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _nav_pages(entries) -> list[str]:
    pages = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    assert config["docs_dir"] == "docs"
    nav = _nav_pages(config["nav"])
    assert len(nav) == len(set(nav)), nav
    assert sorted(nav) == sorted(str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md"))


def test_each_included_file_exists_and_starts_with_the_title_the_page_skips():
    """security.md and benchmarks.md include SECURITY.md and BENCHMARKS.md from their second line, under a title of their
    own: the line skipped must be the file's title, or the page would lose its first words."""
    included = {}
    for page in DOCS.rglob("*.md"):
        for path, lines in INCLUDE.findall(page.read_text()):
            included[path] = lines
    assert included == {"SECURITY.md": ":2:", "BENCHMARKS.md": ":2:"}
    for path in included:
        first = (ROOT / path).read_text().split("\n", 1)[0]
        assert first.startswith("# "), f"{path} starts with {first!r}, not its title"


def test_the_readme_stays_short():
    """The README says what the project is, the two commands and where to read next; the rest is the site."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines: move what is for one audience to its page in docs/"
    for page in ("students", "tas", "staff", "cases", "architecture", "contributing"):
        assert f"(docs/{page}.md" in "\n".join(lines), f"the README links no docs/{page}.md"
