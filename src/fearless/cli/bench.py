"""`fearless bench [--out DIR] [--cases ...] [--quick] [--dry-run]`: the benchmark suite.

On the GPU it runs every case with every implementation this machine has (fearless SIMT and
Tile, CUDA C++ through NVRTC, Triton, cuTile Python, TileGym, PyTorch), checks each result,
times it, and writes DIR/results.json, DIR/results.md and DIR/results.png. A peer missing here
is reported as skipped with the reason. `--dry-run` needs no GPU: it compiles every fearless
case and checks it on the simulator at tiny sizes. Exit status 1 when any result was wrong or
any implementation failed, 2 for a usage error.

The suite is the top-level package `fearless_bench` (src/fearless_bench/), outside the core: it
is imported here, when the command runs, and nowhere else in fearless. Where it is missing the
command says how to install it (`pip install 'fearless[bench]'`, exit status 2).
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

DEFAULT_OUT = Path("bench/results")


HELP = (
    "run the benchmark suite on the GPU (JSON, Markdown table, PNG plot); "
    "--dry-run compiles and simulates every case with no GPU"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"folder for results.json/.md/.png (default {DEFAULT_OUT}, "
        f"{DEFAULT_OUT}/dry-run for --dry-run)",
    )
    parser.add_argument(
        "--cases",
        nargs="+",
        metavar="CASE",
        help="case or family names or shell patterns, e.g. vecadd 'gemm_f16_*' launch "
        "(default: all; `--list` shows them)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smaller sizes and fewer repetitions",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: compile every fearless case and check it on the simulator",
    )
    parser.add_argument("--list", action="store_true", help="list the cases and exit")


INSTALL_HINT = (
    "error: `fearless bench` needs the benchmark suite, the package `fearless_bench`, which is "
    "not installed here ({reason})\n"
    "help: install it with `pip install 'fearless[bench]'` (the suite and its peers' packages), "
    "or run from a checkout with `PYTHONPATH=src`"
)


def unknown_case(patterns: Sequence[str], cases: dict[str, str]) -> str | None:
    """The message for the first of `patterns` that names no case or family of `cases` (case
    -> family), with the closest names; None when each names some."""
    names = sorted({*cases, *cases.values()})
    for pattern in patterns:
        if any(fnmatch.fnmatch(name, pattern) for name in names):
            continue
        close = difflib.get_close_matches(pattern, names, n=5, cutoff=0.5)
        near = f"the closest: {', '.join(close)}; " if close else ""
        return (
            f"fearless bench: error: no case matches {pattern!r}, by name or family\n"
            f"  = help: {near}`fearless bench --list` lists them all"
        )
    return None


def run(args: argparse.Namespace) -> int:
    try:
        from fearless_bench import suite
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "fearless_bench":
            raise  # the suite is there; something it imports is not
        print(INSTALL_HINT.format(reason=exc), file=sys.stderr)
        return 2

    if args.list:
        for case, family in suite.all_cases().items():
            print(f"{family:<12} {case}")
        return 0
    unknown = unknown_case(args.cases or (), suite.all_cases())
    if unknown is not None:
        print(unknown, file=sys.stderr)
        return 2
    out = args.out or (DEFAULT_OUT / "dry-run" if args.dry_run else DEFAULT_OUT)
    if out.exists() and not out.is_dir():
        print(
            f"fearless bench: error: --out {out} is a file; --out takes a folder (for "
            "results.json, results.md and results.png)",
            file=sys.stderr,
        )
        return 2
    try:  # made now: a folder that cannot be made stops the run before any case, not after
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(
            f"fearless bench: cannot write results to {out}: {exc.strerror or exc}", file=sys.stderr
        )
        return 2
    opts = suite.Options(
        out=out,
        cases=args.cases,
        dry_run=args.dry_run,
        quick=args.quick,
        command="fearless " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "fearless bench",
    )
    try:
        return suite.main(opts)
    except SystemExit as exc:  # the GPU run's "needs torch / no GPU" messages
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 2
        raise
