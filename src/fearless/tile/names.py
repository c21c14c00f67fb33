"""What `tile.<name>` may name in a kernel, and the help for a name it does not have (E0433).

A kernel calls the `tile.*` functions of api.py and names the annotations and `tile.unsafe`;
anything else after `tile.` is refused with the closest of those names (difflib), or, for the
names NumPy, Triton and cuTile Python give a function that fearless calls otherwise, with
fearless's name. cuTile Python's `ct.store(array, index=..., tile=...)` writes at any index;
fearless has no such store, and the help names the forms that keep each block to its own
elements (`STORE_FORMS`).
"""

from __future__ import annotations

import difflib

from ..errors import CompileError, Location
from .api import KERNEL_FUNCTIONS

# The names other than functions that a kernel reads from `tile`.
_OTHER_NAMES = ("Part", "Tensor", "Atomic", "Const", "RoundingMode", "unsafe", "function")

# Another library's name for a tile function -> fearless's.
ALIASES: dict[str, str] = {
    "absolute": "abs",
    "fabs": "abs",
    "arctan2": "atan2",
    "power": "pow",
    "divide": "truediv",
    "true_divide": "truediv",
    "div_rn": "truediv",
    "multiply": "mul",
    "subtract": "sub",
    "fdiv": "truediv",
    "select": "where",
    "dot": "mma",
    "trans": "transpose",
    "view": "reshape",
    "broadcast": "broadcast_to",
    "program_id": "block_id",
    "num_programs": "num_blocks",
    "full_like": "full",
    "zeros_like": "zeros",
    "concatenate": "cat",
    "expand": "expand_dims",
}

STORE_FORMS = (
    "a block writes only what it owns: its own tile with `out.store(x)` (or chunks of it, "
    "`for c in out.chunks(shape): c.store(x)`), the tiles a persistent launch gives it with "
    "`for t in out.tiles(): t.store(x)`, or elements at computed coordinates with "
    "`tile.scatter(a, indices, x)` into a `tile.Atomic` parameter"
)


def known_names() -> list[str]:
    """Every name a kernel may read from `tile`, sorted."""
    return sorted({*KERNEL_FUNCTIONS, *_OTHER_NAMES})


def unknown_tile_name(attr: str, loc: Location) -> CompileError:
    """E0433 for `tile.<attr>`, which fearless does not have, with what to write instead."""
    if attr == "store":
        return CompileError(
            "`tile.store` does not exist: a Tile kernel has no store at an arbitrary index",
            loc,
            code="E0433",
            help=STORE_FORMS,
        )
    if attr in ALIASES:
        help = f"fearless calls it `tile.{ALIASES[attr]}`"
    else:
        close = difflib.get_close_matches(attr, known_names(), n=3, cutoff=0.6)
        help = (
            "did you mean " + " or ".join(f"`tile.{n}`" for n in close) + "?"
            if close
            else 'docs/tile.md lists the tile functions ("Math functions" for the elementwise '
            "math); a plain Python function of tile ops is inlined where a kernel calls it"
        )
    return CompileError(f"`tile` has no function `{attr}`", loc, code="E0433", help=help)
