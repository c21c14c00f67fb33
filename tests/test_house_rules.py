"""The house rules of docs/design.md that a test can hold: no file in src/fearless is over 800
lines (DESIGN section 5: a module near 800 lines is a sign it holds two responsibilities;
split it by responsibility, never by trimming lines to meet the number)."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "fearless"
MAX_LINES = 800


def test_no_source_file_is_over_800_lines() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines: {long}"
