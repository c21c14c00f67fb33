"""Entry point of the `fearless` command (also `python -m fearless`): parses, then dispatches.

Each subcommand is a module of this package, named as the command, with `HELP` (its line in
`fearless --help`), `add_arguments(parser)` where it takes any, and `run(args) -> int`, which
returns the exit status; the first line of its docstring is its description (`fearless X -h`).
"""

from __future__ import annotations

import argparse
import sys

from . import (
    bench,
    check,
    compile,
    demo,
    doctor,
    explain,
    fearless_version,
    inspect,
    new,
    run,
    tune,
)

COMMANDS = (demo, doctor, run, inspect, compile, new, check, explain, bench, tune)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fearless",
        description="Memory-safe GPU kernels in Python: compile, run, inspect, diagnose.",
    )
    parser.add_argument("--version", action="version", version=f"fearless {fearless_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        doc = command.__doc__
        sub = subparsers.add_parser(
            command.__name__.rsplit(".", 1)[-1],
            help=command.HELP,
            description=doc.splitlines()[0] if doc else None,
        )
        if hasattr(command, "add_arguments"):
            command.add_arguments(sub)
        sub.set_defaults(handler=command.run)
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
