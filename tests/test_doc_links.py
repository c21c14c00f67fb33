"""Every image and link the documents reference in the tree exists: README.md, bench/README.md
and docs/*.md, relative paths resolved from the document's folder (a README figure removed from
the tree showed as a broken image for days)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
DOCS = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and ![alt](target), and <img src="target">; code spans and blocks are skipped
LINK = re.compile(r"!?\[[^\]]*\]\(\s*([^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
IMG = re.compile(r"<img[^>]*\ssrc=\"([^\"]+)\"")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
EXTERNAL = ("http://", "https://", "mailto:", "#")


def targets(doc: Path) -> list[str]:
    text = CODE.sub("", FENCE.sub("", doc.read_text()))
    found = LINK.findall(text) + IMG.findall(text)
    return [t for t in found if not t.startswith(EXTERNAL)]


def test_the_documents_reference_something() -> None:
    readme = targets(ROOT / "README.md")
    assert any(t.endswith(".png") for t in readme), readme  # the Performance figure
    assert "docs/code-map.md" in readme


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_referenced_path_exists(doc: Path) -> None:
    missing = [t for t in targets(doc) if not (doc.parent / t.split("#", 1)[0]).resolve().exists()]
    assert not missing, f"{doc.relative_to(ROOT)} references paths not in the tree: {missing}"


def test_a_missing_image_is_found(tmp_path: Path) -> None:
    doc = tmp_path / "README.md"
    doc.write_text("![plot](gone.png) and `![not a link](x.png)`\n```\n[no](y.md)\n```\n")
    assert targets(doc) == ["gone.png"]
