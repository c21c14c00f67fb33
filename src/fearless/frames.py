"""Which stack frames are the user's: a frame is fearless's own when its file is inside the
package (but not the CLI, whose `fearless demo` launches kernels as a user would) or is code
fearless generated, or inside torch, whose dispatcher stands between a user's call of
`torch.ops.fearless.<op>` and the operator's code. The user's frame is the first that is not.

A leaf module, so that every layer can point a warning at the user's line: `config.flag`'s
warning about a bad value as well as the autotuner's. runtime/location.py builds the location
of a launch-time error on the same question. The answer is cached per file name: a path
resolution once per file, then a dictionary lookup.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from types import FrameType

_PACKAGE_DIR = Path(__file__).resolve().parent
# The CLI (`fearless demo`) launches kernels as a user would: its frames count as user code.
_CLI_DIR = _PACKAGE_DIR / "cli"


def user_stacklevel() -> int:
    """The `stacklevel` that makes a warning raised by the caller point at the user's line (the
    first frame outside fearless), however deep inside fearless the caller is."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and inside_fearless(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    return level


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
