"""Which stack frames are the user's: a frame is fearless's own when its file is inside the
package (but not the CLI, whose `fearless demo` launches kernels as a user would) or is code
fearless generated, or inside torch, whose dispatcher stands between a user's call of
`torch.ops.fearless.<op>` and the operator's code. The user's frame is the first that is not.

A leaf module, so that every layer can point a warning or an error at the user's line:
`config.flag`'s warning about a bad value as well as the autotuner's, and `user_location`, the
location of a launch-time error or of a wrong kernel hint. Both lookups it makes are cached:
whether a file is inside the package (a path resolution) by file name, and an instruction's
source position (a scan of the code object's position table) by code object and instruction,
so a call from a line seen before costs a frame walk of a few microseconds.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from types import CodeType, FrameType

from .errors import Location

_PACKAGE_DIR = Path(__file__).resolve().parent
# The CLI (`fearless demo`) launches kernels as a user would: its frames count as user code.
_CLI_DIR = _PACKAGE_DIR / "cli"


def user_stacklevel() -> int:
    """The `stacklevel` that makes a warning raised by the caller point at the user's line (the
    first frame outside fearless), however deep inside fearless the caller is."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and _fearless_frame(frame):
        frame = frame.f_back
        level += 1
    return level


def _fearless_frame(frame: FrameType) -> bool:
    """Whether `frame` is fearless's: its file is (`inside_fearless`), or it runs code Python
    generated for a fearless class (a dataclass's `__init__`, file "<string>", whose
    `__post_init__` may refuse a value)."""
    filename = frame.f_code.co_filename
    if inside_fearless(filename):
        return True
    if filename != "<string>":
        return False
    module = str(frame.f_globals.get("__name__", ""))
    return module.startswith("fearless.") and not module.startswith("fearless.cli.")


@functools.lru_cache(maxsize=1024)
def inside_fearless(filename: str) -> bool:
    """Whether frames of `filename` are fearless's (or torch's, once torch is loaded: no torch
    frame exists before that, so a cached answer stays right)."""
    if filename.startswith("<fearless"):  # generated code (launch.py's generated launchers)
        return True
    try:
        path = Path(filename).resolve()
        if path.is_relative_to(_PACKAGE_DIR):
            return not path.is_relative_to(_CLI_DIR)
        torch = sys.modules.get("torch")
        torch_file = getattr(torch, "__file__", None)
        return torch_file is not None and path.is_relative_to(Path(torch_file).resolve().parent)
    except (OSError, ValueError):
        return False


def user_location() -> Location | None:
    """The location of the innermost calling frame that is not fearless's (`_fearless_frame`):
    the user's line, with its columns where Python records them."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _fearless_frame(frame):
        frame = frame.f_back
    return None if frame is None else location_of(frame)


def location_of(frame: FrameType) -> Location:
    """The location `frame` is at: its line, with the columns where Python records them."""
    line, col, end_line, end_col = frame.f_lineno, 0, None, None
    positions = _positions(frame.f_code, frame.f_lasti)
    if positions is not None:
        line = positions[0] or line
        col = positions[2] or 0
        end_line, end_col = positions[1], positions[3]
    return Location(frame.f_code.co_filename, line, col, end_line, end_col)


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
