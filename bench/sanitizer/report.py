"""Summarise compute-sanitizer logs: per log, the error count and each distinct error (the API
call or access, its result, and the host frames nearest it), so that errors raised inside a
dependency's start-up (the control runs) can be told from fearless's own.

    python3 bench/sanitizer/report.py LOG...
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path


def errors(text: str) -> list[str]:
    """Each error of a log as one line: its header and its first host frames."""
    out: list[str] = []
    blocks = re.split(r"^========= (?=Program hit|Invalid|Error)", text, flags=re.M)
    for block in blocks[1:]:
        lines = block.splitlines()
        head = lines[0].strip()
        frames = [
            re.sub(r"\s+", " ", ln.replace("=========", "").strip())
            for ln in lines[1:]
            if "Host Frame" in ln or re.search(r"^=========\s+#\d+", ln)
        ]
        out.append(head + " | " + " <- ".join(f[:110] for f in frames[:4]))
    return out


def main(paths: list[str]) -> None:
    for p in paths:
        text = Path(p).read_text(errors="replace")
        summary = re.findall(r"ERROR SUMMARY: (\d+) error", text)
        count = summary[-1] if summary else "no summary (did it run?)"
        print(f"## {Path(p).name}: {count} errors")
        for line, n in Counter(errors(text)).most_common():
            print(f"  {n:4d} x {line}")


if __name__ == "__main__":
    main(sys.argv[1:])
