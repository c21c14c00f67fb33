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


def test_only_config_reads_the_environment() -> None:
    """DESIGN section 5: no globals read from the environment outside `config.py` (comments
    may name os.environ; code may not)."""
    import re

    readers = {
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if p.name != "config.py"
        and any(
            re.search(r"\bos\.(environ|getenv|putenv)\b", line.split("#", 1)[0])
            for line in p.read_text().splitlines()
        )
    }
    assert not readers, f"read the environment outside config.py: {sorted(readers)}"
