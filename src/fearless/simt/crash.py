"""Internal compiler errors: a bug in fearless, reported as one with a reproducer file.

The reproducer records the kernel's source, the exception with its traceback, and the
versions, under the cache directory, so that a bug report carries everything needed.
"""

from __future__ import annotations

import hashlib
import inspect
import platform
import traceback
from pathlib import Path
from typing import Any

from .. import __version__, config
from ..errors import FearlessError


class InternalCompilerError(FearlessError):
    """fearless itself failed (not the user's code)."""

    code = "E0999"


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
