"""Internal compiler errors: a bug in fearless, reported as one with a reproducer file.

The reproducer records the kernel's source, the exception with its traceback, and the
versions, under the cache directory, so that a bug report carries everything needed.

`user_facing` wraps the public entry points of both tracks: fearless errors lose the compiler's
frames, anything else becomes an InternalCompilerError with a reproducer. The operators of
fearless.ops take the first half only (`raise_clean`, in ops/_route.py's `clean_op_errors` and
ops/_replay.py): their host code runs torch, whose own exceptions are not fearless's bugs.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import platform
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from . import config
from .errors import FearlessError
from .version import __version__


class InternalCompilerError(FearlessError, code="E0999"):
    """fearless itself failed (not the user's code)."""


def internal_error(method: Any, args: tuple[Any, ...], exc: BaseException) -> InternalCompilerError:
    target = args[0] if args else None
    func = getattr(target, "func", None) or getattr(getattr(target, "kernel", None), "func", None)
    try:
        source = inspect.getsource(func) if func is not None else "<no kernel source>"
    except (OSError, TypeError):
        source = "<source unavailable>"
    import llvmlite
    import numpy

    text = "\n".join(
        [
            f"fearless {__version__}, Python {platform.python_version()}, "
            f"llvmlite {llvmlite.__version__}, numpy {numpy.__version__}",
            f"while running {getattr(method, '__qualname__', method)!s}",
            "",
            source,
            "",
            "".join(traceback.format_exception(exc)),
        ]
    )
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path: Path | None = config.cache_dir() / "crashes" / f"ice-{digest}.txt"
    try:
        assert path is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError:
        path = None
    where = f"a reproducer is in {path}" if path else "no reproducer could be written"
    return InternalCompilerError(
        f"internal compiler error: {type(exc).__name__}: {exc}",
        help=f"this is a bug in fearless, not in your kernel; please report it ({where})",
    )


F = TypeVar("F", bound=Callable[..., Any])


def user_facing(method: F) -> F:
    """Raise fearless errors without the compiler's frames (FEARLESS_TRACEBACK=1 keeps them).

    The diagnostic already names the user's line; frames inside fearless would only bury it.
    Other exceptions are bugs in fearless: they become an InternalCompilerError that says so
    and points at a reproducer file.
    """

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            reraise(exc, method, args)

    return wrapper  # type: ignore[return-value]


def raise_clean(exc: Exception) -> NoReturn:
    """Raise `exc` (a fearless error, or a warning raised under `-W error`), whose message names
    the user's line already, without the frames it came through (all of them with
    FEARLESS_TRACEBACK=1)."""
    if config.show_internal_frames():
        raise exc
    raise exc.with_traceback(None) from None


def reraise(exc: Exception, method: Any, args: tuple[Any, ...]) -> NoReturn:
    """What `user_facing` does with an exception out of `method(*args)`, for warm paths that
    catch inline rather than pay for a wrapper call."""
    if isinstance(exc, FearlessError | Warning) or config.show_internal_frames():
        raise_clean(exc)
    raise internal_error(method, args, exc) from exc
