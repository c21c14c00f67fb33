"""Entry point of the `fearless` command (also `python -m fearless`): parses, then dispatches.

Each subcommand is a module of this package with `add_parser(subparsers)`, which registers its
arguments and sets `handler`, and `run(args) -> int`, which returns the exit status.
"""

from __future__ import annotations

import argparse
import sys

from . import bench, check, compile, demo, doctor, explain, fearless_version, inspect, new, run

COMMANDS = (demo, doctor, run, inspect, compile, new, check, explain, bench)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fearless",
        description="Memory-safe GPU kernels in Python: compile, run, inspect, diagnose.",
    )
    parser.add_argument("--version", action="version", version=f"fearless {fearless_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (default: `sys.argv[1:]`); returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else 2
    status: int = args.handler(args)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
