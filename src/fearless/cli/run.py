"""`fearless run FILE [ARGS...]`: runs a script as `__main__`, fearless errors as diagnostics.

A `FearlessError` that escapes the script is printed as its rendered diagnostic alone (it
already names the user's file:line:col), and the exit status is 1. Any other exception keeps
its traceback, minus the frames of this command, as `python FILE` would print it: from the
script's first frame on, and a SyntaxError in the script as its file, line and caret alone.
A KeyboardInterrupt (Ctrl-C) is shown the same way, from the script's first frame, and the
exit status is 130. `FEARLESS_TRACEBACK=1` keeps every frame (for fearless developers).
`print_user_exception` is shared with `fearless compile` (an exception importing a file).
"""

from __future__ import annotations

import argparse
import runpy
import sys
import traceback
from pathlib import Path
from types import TracebackType

from .. import config
from ..errors import FearlessError

HELP = "run a Python script; fearless errors print as diagnostics, not tracebacks"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="the script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")


def _frames_from(tb: TracebackType | None, script: Path) -> TracebackType | None:
    """Drop the leading frames (this command, runpy, importlib) up to the script's first
    frame; None when no frame is the script's (it did not compile: a SyntaxError names its
    file, line and column itself, and Python prints it with no traceback)."""
    start = tb
    while start is not None and Path(start.tb_frame.f_code.co_filename) != script:
        start = start.tb_next
    return start


def print_user_exception(exc: BaseException, script: Path) -> None:
    """Print an exception that escaped the user's `script` (a resolved path) as Python would:
    a FearlessError as its diagnostic, anything else with the traceback from the script's first
    frame on, to stderr. `FEARLESS_TRACEBACK=1` prints every frame."""
    if config.show_internal_frames():
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    elif isinstance(exc, FearlessError):
        print(exc, file=sys.stderr)
    else:
        traceback.print_exception(type(exc), exc, _frames_from(exc.__traceback__, script))


def run_script(script: Path, args: list[str]) -> int:
    """Run `script` as `__main__` with `sys.argv = [script, *args]`; return the exit status."""
    script = script.resolve()
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.parent))  # as `python FILE` does
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        return _exit_status(exc.code)
    except KeyboardInterrupt as exc:
        print_user_exception(exc, script)
        return 130  # 128 + SIGINT, as a shell reports `python FILE` ended by Ctrl-C
    except Exception as exc:
        print_user_exception(exc, script)
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return 0


def _exit_status(code: object) -> int:
    """What the interpreter would exit with for `sys.exit(code)`."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def not_a_file(path: Path) -> str | None:
    """Why `path` is not a Python file to run or import (None when it is a file)."""
    if path.is_file():
        return None
    if path.is_dir():
        return f"`{path}` is a folder, not a Python file"
    return f"no such file: {path}"


def run(args: argparse.Namespace) -> int:
    script: Path = args.file
    why = not_a_file(script)
    if why is not None:
        print(f"fearless run: error: {why}", file=sys.stderr)
        return 2
    return run_script(script, list(args.args))
