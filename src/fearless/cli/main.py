"""Entry point of the `fearless` command (also `python -m fearless`): parses, then dispatches.

Each subcommand is a module of this package, named as the command, with `HELP` (its line in
`fearless --help`), `add_arguments(parser)` where it takes any, and `run(args) -> int`, which
returns the exit status; the first line of its docstring is its description (`fearless X -h`).

Two ends of a command are the same for all: a closed pipe (`fearless doctor | head -1`) ends it
silently with status 141, as a shell reports a process that SIGPIPE ends, and Ctrl-C ends it
with one line, `fearless: interrupted`, and status 130.
"""

from __future__ import annotations

import argparse
import os
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
    try:
        status: int = args.handler(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except BrokenPipeError:
        _discard_stdout()
        return 141  # 128 + SIGPIPE, what a shell reports for a process a closed pipe ends
    except KeyboardInterrupt:
        print("fearless: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT
    return status


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's flush at exit, which still holds
    what the closed pipe refused, writes it nowhere instead of raising again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # not a file (a test's capture): nothing to do
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":
    raise SystemExit(main())
