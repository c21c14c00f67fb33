"""Every ```python block of README.md and docs/*.md runs as written, on the CPU simulator.

Each block is saved as a file (kernels need their source in one) and run as a script, so it is
checked as a reader would paste it. An HTML comment on the line before a block's fence changes
that, and is meant to be rare:

    <!-- doctest: raises BorrowError -->   the block ends in this fearless error (shown on
                                           purpose); everything before it must run
    <!-- doctest: skip (reason) -->        not run: it needs a GPU, or it is a fragment of the
                                           block before it; the reason is required

docs/errors.md has its own harness (tests/test_errors_doc.py: each example raises exactly the
error shown), so it is left to that test.
"""

from __future__ import annotations

import re
import runpy
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import fearless as fl
from fearless import config

ROOT = Path(__file__).resolve().parents[1]
OWN_HARNESS = {"errors.md"}
MARKER = re.compile(r"<!--\s*doctest:\s*(raises|skip)\b\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    file: Path
    line: int  # of the opening fence
    code: str
    directive: str | None  # "raises" or "skip"
    argument: str

    @property
    def id(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The ```python blocks of a Markdown file, with the directive before each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip().startswith("```python"):
            start = i
            i += 1
            body: list[str] = []
            while i < len(lines) and not lines[i].strip().startswith("```"):
                body.append(lines[i])
                i += 1
            before = lines[start - 1].strip() if start > 0 else ""
            m = MARKER.fullmatch(before)
            out.append(
                Block(
                    path,
                    start + 1,
                    "\n".join(body) + "\n",
                    m.group(1) if m else None,
                    m.group(2) if m else "",
                )
            )
        i += 1
    return out


def documents() -> list[Path]:
    docs = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in OWN_HARNESS)
    return [ROOT / "README.md", *docs]


ALL = [b for doc in documents() for b in blocks(doc)]


def test_the_documents_have_blocks_and_directives_are_well_formed() -> None:
    assert any(b.file.name == "README.md" for b in ALL)
    assert any(b.file.name == "simt.md" for b in ALL)
    for doc in documents():
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(r"<!--\s*doctest:(.*?)-->", text):
            assert MARKER.fullmatch(m.group(0)), f"{doc.name}: malformed {m.group(0)!r}"
    for b in ALL:
        if b.directive == "skip":
            assert b.argument.startswith("(") and len(b.argument) > 4, f"{b.id}: skip needs (why)"
        if b.directive == "raises":
            assert isinstance(getattr(fl, b.argument, None), type), f"{b.id}: {b.argument}?"
    skipped = [b for b in ALL if b.directive == "skip"]
    assert len(skipped) <= len(ALL) // 4, "most blocks must run"


@pytest.mark.parametrize("block", [b for b in ALL if b.directive != "skip"], ids=lambda b: b.id)
def test_block_runs_on_the_simulator(
    block: Block,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FEARLESS_TARGET", "sim")
    monkeypatch.setattr(config, "_target_override", None)
    monkeypatch.chdir(tmp_path)
    script = tmp_path / f"block_{block.line}.py"
    script.write_text(block.code, encoding="utf-8")
    monkeypatch.setattr(sys, "argv", [str(script)])
    if block.directive == "raises":
        with pytest.raises(getattr(fl, block.argument)):
            runpy.run_path(str(script), run_name="__main__")
    else:
        runpy.run_path(str(script), run_name="__main__")


def test_the_api_reference_builds_from_the_docstrings(tmp_path: Path) -> None:
    """`make apidocs`: pdoc renders the public modules; the public names are on their pages."""
    import pdoc

    pdoc.pdoc("fearless", "fearless.simt", output_directory=tmp_path)
    top = (tmp_path / "fearless.html").read_text(encoding="utf-8")
    for name in ("zeros_like", "HostCopyWarning", "from_numpy", "synchronize", "astype"):
        assert name in top, name
    simt_page = (tmp_path / "fearless" / "simt.html").read_text(encoding="utf-8")
    assert "DisjointSlice" in simt_page and "index_1d" in simt_page
    assert (tmp_path / "fearless" / "tile.html").is_file()
    assert (tmp_path / "fearless" / "math.html").is_file()
