"""Math functions that Tile IR has no op for, composed of tile ops: `tile.erf`.

Like random.py, these need nothing new from the backends: the simulator runs the same ops the
GPU does, so the two agree to the last bit wherever the ops themselves do.

    erf     the rational approximation that Eigen and XLA use for f32 erf: the input clamped
            to [-4, 4] (erf is 1 to f32 precision beyond), then x * P(x^2) / Q(x^2), P of
            degree 6 and Q of degree 4 in x^2, evaluated by Horner's rule. About 4e-7
            relative error in f32 against the exact erf (tests/test_tile_first_hour.py). f16
            and bf16 tiles are computed in f32 and rounded back once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import dtypes
from ..errors import KernelTypeError, Location
from ..frontend.values import Weak
from ..ir.core import Value
from ..ir.tile import ops
from ..ir.tile.types import tile_type
from .rules import TileRules

LocOf = Callable[[str], Location]

# erf(x) ~ x * P(x^2) / Q(x^2) on [-4, 4], lowest power first.
ERF_P = (
    -1.60960333262415e-02,
    -2.95459980854025e-03,
    -7.34990630326855e-04,
    -5.69250639462346e-05,
    -2.10102402082508e-06,
    2.77068142495902e-08,
    -2.72614225801306e-10,
)
ERF_Q = (
    -1.42647390514189e-02,
    -7.37332916720468e-03,
    -1.68282697438203e-03,
    -2.13374055278905e-04,
    -1.45660718464996e-05,
)
ERF_CLAMP = 4.0


def _horner(lw: TileRules, x: Value, coefficients: tuple[float, ...], loc: Location) -> Value:
    """sum(c[i] * x**i) as ((c[n] * x + c[n-1]) * x + ...) + c[0], in x's dtype."""
    acc: Any = Weak(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        acc = lw.binary("add", lw.binary("mul", acc, x, loc), Weak(c), loc)
    return acc  # type: ignore[no-any-return]


def api_erf(lw: TileRules, loc_of: LocOf, x: Any) -> Value:
    loc = loc_of("x")
    v = lw.tile_value(x, loc, dtypes.f32)
    dt = tile_type(v).dtype
    if dt not in (dtypes.f32, dtypes.f16, dtypes.bf16):
        found = "an f64 tile" if dt == dtypes.f64 else f"a {dt.name} tile"
        raise KernelTypeError(
            f"`tile.erf` is for f32, f16 and bf16 tiles, found {found}",
            loc,
            help="its approximation is accurate to f32 precision: convert with `x.astype(fl.f32)`",
        )
    if dt != dtypes.f32:
        v = lw.emit(ops.Cast(v, dtypes.f32, loc))
    clamped = lw.binary("min", lw.binary("max", v, Weak(-ERF_CLAMP), loc), Weak(ERF_CLAMP), loc)
    x2 = lw.binary("mul", clamped, clamped, loc)
    p = lw.binary("mul", _horner(lw, x2, ERF_P, loc), clamped, loc)
    result = lw.binary("div", p, _horner(lw, x2, ERF_Q, loc), loc)
    return result if dt == dtypes.f32 else lw.emit(ops.Cast(result, dt, loc))


HANDLERS: dict[str, Callable[..., Value]] = {"erf": api_erf}
