"""The runtime's errors at the user's line: settings read with a located error, warnings at
the user's line, the refusals of kernel-only calls and wrong arguments, and the check of a
moved handle. Where the user's line is (`user_location`, the first frame outside fearless and
outside torch) is the leaf `frames.py`'s answer, which the IR and the frontend ask too.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable
from typing import TypeVar

from ..errors import ArgumentError, FearlessError, Location, MovedError
from ..frames import _fearless_frame, location_of, user_location

__all__ = [
    "argument_error",
    "check_not_moved",
    "copy_location",
    "kernel_only",
    "read_setting",
    "user_location",  # frames.py's, for the runtime's modules and the tracks
    "warn_at_user",
]


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


def argument_error(message: str, help: str | None = None) -> ArgumentError:
    """E0701, an argument of the wrong type or kind, at the user's line."""
    return ArgumentError(message, user_location(), help=help)


# The standard library's copying and pickling, between a user's `copy.copy(x)` and x's
# `__copy__`: an error of the copy points at the user's line, past them.
_COPY_MODULES = frozenset(("copy", "copyreg", "pickle", "_compat_pickle"))


def copy_location() -> Location | None:
    """The user's line that asked for a copy of a fearless object (`copy.copy`,
    `copy.deepcopy`, `pickle.dumps`): the first frame outside fearless and the copy modules."""
    frame = sys._getframe(1)
    while frame is not None and (
        _fearless_frame(frame) or frame.f_globals.get("__name__") in _COPY_MODULES
    ):
        frame = frame.f_back  # type: ignore[assignment]
    return None if frame is None else location_of(frame)


@functools.lru_cache(maxsize=1024)
def check_not_moved(
    moved_at: Location | None, message: str, note: str, help: str, copying: bool = False
) -> None:
    """The MovedError of a handle used after it gave its memory away at `moved_at` (None: it
    did not), pointing at the user's line (`copying`: the line of the `copy.copy`,
    `copy.deepcopy` or `pickle.dumps` that asked); `note` precedes the moving line. Where the
    use is the very expression that moved the handle, it moved in an earlier run of that line
    (a loop, or a second call of the function around it), and the note says so."""
    if moved_at is not None:
        here = copy_location() if copying else user_location()
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
