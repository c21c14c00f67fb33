"""Python's `math` module in Tile kernels: folded on compile-time numbers, the tile function
of the same name on tiles.

`math.sqrt(2 / math.pi)` in a kernel is a number known when the kernel compiles: its arguments
are literals, `tile.Const` parameters or module constants, so it is evaluated here, by Python,
and becomes a weak literal like any other (frontend/values.py). On a tile (or a run-time
scalar), `math.<fn>` is `tile.<fn>` where the Tile track has that function (`math.fabs` is
`tile.abs`); for the others the error names what to write instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..errors import CompileError, KernelTypeError
from ..frontend.intrinsics import Call
from ..frontend.values import Weak
from .api import KERNEL_FUNCTIONS
from .rules import Operand, TileRules

Rule = Callable[[TileRules, Call], Operand]

# `math.<name>` whose tile function has another name.
_RENAMED = {"fabs": "abs"}
# How to write the math functions that have no tile function, on tiles.
_COMPOSED = {
    "log10": "`tile.log(x) * (1 / math.log(10))`",
    "log1p": "`tile.log(1 + x)`",
    "expm1": "`tile.exp(x) - 1`",
    "hypot": "`tile.sqrt(x * x + y * y)`",
    "fmod": "`x - tile.truediv(x, y).astype(fl.i32).astype(x.dtype) * y` (or `%`, Python's "
    "remainder, with the divisor's sign)",
    "trunc": "`tile.where(x < 0, tile.ceil(x), tile.floor(x))`",
    "copysign": "`tile.where((y < 0) | ((y == 0) & (1 / y < 0)), -abs(x), abs(x))`",
    "isinf": "`abs(x) == math.inf`",
    "isfinite": "`abs(x) < math.inf`",
    "degrees": "`x * (180 / math.pi)`",
    "radians": "`x * (math.pi / 180)`",
}


def math_functions() -> list[tuple[str, Any, str | None]]:
    """Each public function of `math`: its name, the function, and the tile function it
    means on tiles (None where the Tile track has none)."""
    out = []
    for name in sorted(dir(math)):
        fn = getattr(math, name)
        if name.startswith("_") or not callable(fn):
            continue
        tile_name = _RENAMED.get(name, name)
        out.append((name, fn, tile_name if tile_name in KERNEL_FUNCTIONS else None))
    return out


def math_rule(name: str, tile_rule: Rule | None) -> Rule:
    """The rule of `math.<name>`: folded when every argument is a compile-time number, else
    `tile_rule` (the tile function's), else an error that says what to write."""

    def rule(lw: TileRules, call: Call) -> Operand:
        if call.args and all(isinstance(a, Weak) for a in call.args):
            return _fold(name, call)
        if tile_rule is not None:
            return tile_rule(lw, call)
        compose = _COMPOSED.get(name)
        help = (
            f"on tiles write {compose}"
            if compose
            else 'the Tile track\'s functions are listed in docs/tile.md ("Math functions")'
        )
        raise KernelTypeError(
            f"`math.{name}` runs at compile time, on numbers, and the Tile track has no "
            f"`tile.{name}` for tiles",
            call.loc,
            help=help,
        )

    rule.__doc__ = f"`math.{name}`: folded on compile-time numbers" + (
        f", `tile.{_RENAMED.get(name, name)}` on tiles." if tile_rule else "."
    )
    return rule


def _fold(name: str, call: Call) -> Operand:
    """`math.<name>` of compile-time numbers, evaluated now."""
    values = [a.value for a in call.args]
    written = f"math.{name}({', '.join(map(repr, values))})"
    try:
        result = getattr(math, name)(*values)
    except (ValueError, OverflowError, TypeError, ZeroDivisionError) as exc:
        raise CompileError(
            f"`{written}` fails when the kernel compiles: {exc}",
            call.loc,
            help="its arguments are compile-time numbers, so Python evaluates it here",
        ) from None
    if isinstance(result, tuple) and all(isinstance(r, bool | int | float) for r in result):
        return tuple(Weak(r) for r in result)
    if not isinstance(result, bool | int | float):
        raise CompileError(
            f"`{written}` gives {type(result).__name__}, not a number a kernel computes with",
            call.loc,
        )
    return Weak(result)
