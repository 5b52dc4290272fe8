"""The docs name real files: a renamed or removed module fails here, not in a reader's hands.

Every ``sparklog/...`` (and ``pyspark_sparklog/...``) path in ``docs/*.md`` and the README
must exist in the repository, and every relative Markdown link there must resolve inside
it (a clone has nothing outside the repository to link to).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]

# a path starts where no word or path goes on before it (not inside `.venv/bin/sparklog` or
# `__sparklog_metadata/`); the prose's full stop after it is not part of it
_PATH = re.compile(r"(?<![\w/.-])(?:pyspark_)?sparklog/[\w./-]*")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _paths(text: str) -> set[str]:
    return {m.group(0).rstrip(".-") for m in _PATH.finditer(text)}


def _relative_links(text: str) -> set[str]:
    links = {m.group(1).split("#", 1)[0] for m in _LINK.finditer(text)}
    return {link for link in links if link and "://" not in link and not link.startswith("mailto:")}


def test_docs_exist() -> None:
    assert (ROOT / "docs" / "architecture.md").is_file()
    assert "docs/architecture.md" in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_named_paths_exist(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    missing = sorted(p for p in _paths(text) if not (ROOT / p).exists())
    assert not missing, f"{doc.name} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_stay_in_the_repository(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    for link in _relative_links(text):
        target = (doc.parent / link).resolve()
        assert target.is_relative_to(ROOT), f"{doc.name} links outside the repository: {link}"
        assert target.exists(), f"{doc.name} links to a missing file: {link}"


def test_path_pattern() -> None:
    text = ("see `sparklog/broker/server.py`, `sparklog/storage/` and (sparklog/spark/reader.py). "
            "Also pyspark_sparklog/__init__.py; not .venv/bin/sparklog or __sparklog_metadata/x.")
    assert _paths(text) == {"sparklog/broker/server.py", "sparklog/storage/",
                            "sparklog/spark/reader.py", "pyspark_sparklog/__init__.py"}
