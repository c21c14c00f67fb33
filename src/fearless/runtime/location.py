"""Where in the user's code a launch-time error happened: the first frame outside fearless
(and outside torch, whose dispatcher stands between a user's call of `torch.ops.fearless.<op>`
and the operator's code), as the leaf `frames.py` tells them apart.

Called on error paths, and where a location must be recorded for a later error (`partition()`
records where the tensor moved). Both lookups it makes are cached: whether a file is inside
the package (a path resolution: `frames.inside_fearless`) by file name, and an instruction's
source position (a scan of the code object's position table) by code object and instruction,
so a call from a line seen before costs a frame walk of a few microseconds.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable
from types import CodeType, FrameType
from typing import TypeVar

from ..errors import FearlessError, KernelTypeError, Location, MovedError
from ..frames import inside_fearless


def user_location() -> Location | None:
    """The innermost calling frame whose file is not inside the fearless package."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and inside_fearless(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    line, col, end_line, end_col = frame.f_lineno, 0, None, None
    positions = _positions(frame.f_code, frame.f_lasti)
    if positions is not None:
        line = positions[0] or line
        col = positions[2] or 0
        end_line, end_col = positions[1], positions[3]
    return Location(frame.f_code.co_filename, line, col, end_line, end_col)


T = TypeVar("T")


def read_setting(read: Callable[[], T], error: type[FearlessError], help: str) -> T:
    """`read()`, a `config` reader of an environment variable, with the ValueError of a
    malformed value raised as `error` at the user's line (not from inside fearless)."""
    try:
        return read()
    except ValueError as exc:
        raise error(str(exc), user_location(), help=help) from None


def warn_at_user(message: str, category: type[Warning]) -> None:
    """Warn at the user's line (the innermost frame outside fearless), so that the filter
    `warnings` keeps per location shows it once per calling line, as Python's own would."""
    loc = user_location()
    if loc is None:
        warnings.warn(message, category, stacklevel=2)
    else:
        warnings.warn_explicit(message, category, loc.file, max(loc.line, 1))


def kernel_only(what: str, kernel: str, help: str, verb: str = "called") -> FearlessError:
    """E0605, what only kernels may use (`what`, e.g. "`tile.load`") used on the host, at the
    user's line; `kernel` the decorator that makes one ("@tile.kernel"), `verb` the use."""
    return FearlessError(
        f"{what} can only be {verb} inside a {kernel}", user_location(), code="E0605", help=help
    )


def argument_error(message: str, help: str | None = None) -> KernelTypeError:
    """E0701, an argument of the wrong type or kind, at the user's line."""
    return KernelTypeError(message, user_location(), code="E0701", help=help)


@functools.lru_cache(maxsize=1024)
def check_not_moved(moved_at: Location | None, message: str, note: str, help: str) -> None:
    """The MovedError of a handle used after it gave its memory away at `moved_at` (None: it
    did not), pointing at the user's line; `note` precedes the moving line. Where the use is
    the very expression that moved the handle, it moved in an earlier run of that line (a loop,
    or a second call of the function around it), and the note says so."""
    if moved_at is not None:
        here = user_location()
        where = f"{note} {moved_at}"
        if here is not None and (here.file, here.line, here.col) == (
            moved_at.file,
            moved_at.line,
            moved_at.col,
        ):
            where += (
                ", by an earlier run of this same line (a loop, or another call of its function)"
            )
        raise MovedError(message, here, notes=[where], help=help)


@functools.lru_cache(maxsize=4096)
def _positions(
    code: CodeType, lasti: int
) -> tuple[int | None, int | None, int | None, int | None] | None:
    """(line, end_line, col, end_col) of instruction `lasti` of `code` (Python 3.11+)."""
    co_positions = getattr(code, "co_positions", None)
    if co_positions is None or lasti < 0:
        return None
    for index, pos in enumerate(co_positions()):
        if index == lasti // 2:  # one entry per 2-byte code unit
            return pos  # type: ignore[no-any-return]
    return None
