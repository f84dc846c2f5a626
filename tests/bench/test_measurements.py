"""measurements/ and the docs that quote it: every folder and file kept is in the index
(measurements/README.md), and every link into measurements/ from the top-level pages, docs/ or
the index resolves to a file that exists (a link to a folder says too little: link the file a claim
rests on)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS = ROOT / "measurements"
INDEX = MEASUREMENTS / "README.md"
DOCS = [*sorted(ROOT.glob("*.md")), INDEX, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def links_into_measurements(doc: Path) -> list[tuple[str, Path]]:
    """(as written, resolved) for every relative link of ``doc`` that lands in measurements/."""
    out = []
    for target in LINK.findall(doc.read_text()):
        if "://" in target:
            continue
        resolved = (doc.parent / target).resolve()
        if resolved == MEASUREMENTS or MEASUREMENTS in resolved.parents:
            out.append((target, resolved))
    return out


def test_every_folder_kept_is_indexed():
    folders = sorted(p.name for p in MEASUREMENTS.iterdir() if p.is_dir())
    assert folders, "no measurement folders"
    index = INDEX.read_text()
    missing = [f for f in folders if f"\n## {f}\n" not in index]
    assert not missing, f"measurements/README.md has no section for {missing}"


def test_every_file_kept_is_linked_from_the_index():
    linked = {resolved for _, resolved in links_into_measurements(INDEX)}
    files = [p for p in MEASUREMENTS.rglob("*") if p.is_file() and p != INDEX]
    unlisted = sorted(str(p.relative_to(MEASUREMENTS)) for p in files if p.resolve() not in linked)
    assert not unlisted, f"measurements/README.md does not link {unlisted}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_into_measurements_name_files_that_exist(doc):
    bad = [target for target, resolved in links_into_measurements(doc)
           if resolved != INDEX and not resolved.is_file()]
    assert not bad, f"{doc.relative_to(ROOT)} links to what is not a file: {bad}"


def test_the_docs_quote_measurements_only_by_link_into_the_top_level_folder():
    stale = [str(doc.relative_to(ROOT)) for doc in DOCS if "docs/measurements" in doc.read_text()]
    assert not stale, f"still naming docs/measurements: {stale}"
