"""`fearless check FILE...`: finds aliased launches and uses of moved tensors without running.

The command over the static host-code check of `fearless/check/` (driver.py says what it
reports and what it leaves to the launch-time check): prints each finding, each file skipped,
a note for each folder with no Python file in it, and a summary. Exit status: 0 no errors, 1 errors found, 2 a file could not be read or parsed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..check.driver import check_paths, summary

HELP = "find aliased launches (E0502) and uses of moved tensors (E0382) without running"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", type=Path, metavar="FILE", help="files or folders")


def run(args: argparse.Namespace) -> int:
    reports = check_paths(args.paths)
    for report in reports:
        for finding in report.findings:
            print(finding.render(), end="\n\n")
        if report.skipped is not None:
            print(f"note: skipped `{report.path}`: it is {report.skipped}, not a regular file")
    checked = [r.path for r in reports if r.skipped is None]
    for path in args.paths:
        if path.is_dir() and not any(p.is_relative_to(path) for p in checked):
            print(f"note: no Python files (`*.py`) found in `{path}`")
    print(summary(reports))
    if not all(r.readable for r in reports):
        return 2
    return 1 if any(f.severity == "error" for r in reports for f in r.findings) else 0
