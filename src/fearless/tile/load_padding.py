"""`padding=` of `tile.load` and `tile.load_like`: any value, as Triton's `other=`.

Tile IR pads the elements of a tile that lie outside the array with one of 0, -0.0, inf, -inf
and nan (the partition view's padding value). Those stay in the load. Any other value, a
compile-time number or a run-time scalar (a 0-d tile, such as a scalar parameter), is emulated:
the load pads with 0, and a `tile.where` on the in-bounds mask puts the value in the padded
elements. The mask is built per tile axis from the tile's coordinate, an iota and the array's
extent along the axis the tile axis runs on (`order`): `0 <= index * size + iota < extent`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import dtypes
from ..errors import KernelTypeError, Location
from ..frontend.values import PyObj, Weak
from ..ir.core import Value
from ..ir.tile import ops
from ..ir.tile.types import ArrayParamType, tile_type
from .rules import TileRules

# What a load pads with: a value Tile IR has (float), or one emulated (`Emulated`).
Padding = float


class Emulated:
    """A padding Tile IR cannot pad with: `value`, a tile constant or a run-time 0-d tile."""

    def __init__(self, value: Value) -> None:
        self.value = value


def padding_of(lw: TileRules, p: Any, at: ArrayParamType, loc: Location) -> Padding | Emulated:
    """The padding of a load of an array of `at`: a float Tile IR pads with, or the value to
    put in the padded elements after the load."""
    if isinstance(p, Weak) and not isinstance(p.value, bool):
        v = float(p.value)
        if not at.dtype.is_float and (math.isinf(v) or math.isnan(v)):
            raise KernelTypeError(  # Tile IR pads integers with zero only; no int holds inf
                f"the padding of a load of {at.dtype.name} must be a value {at.dtype.name} "
                f"holds, not {v}",
                loc,
                help="pad an integer array with an integer (`padding=-1`); for the identity "
                f"of `tile.max` of {at.dtype.name}, its smallest value",
            )
        if v == 0.0:
            return 0.0 if not at.dtype.is_float else v  # an int's -0.0 is its 0
        if math.isinf(v) or math.isnan(v):
            return v
    if isinstance(p, PyObj | tuple) or (isinstance(p, Weak) and isinstance(p.value, bool)):
        raise KernelTypeError(
            "the padding of a load must be a number or a scalar",
            loc,
            help="e.g. `padding=-1`, `padding=-math.inf`, or a scalar parameter",
        )
    value = lw.tile_value(p, loc, at.dtype)
    vt = tile_type(value)
    if vt.shape != () or vt.dtype != at.dtype:
        raise KernelTypeError(
            f"the padding of a load of {at.dtype.name} must be a {at.dtype.name} scalar, "
            f"found {vt}",
            loc,
            help=f"convert it: `.astype(fl.{at.dtype.name})`, or pass a number",
        )
    return Emulated(value)


def pad(
    lw: TileRules,
    loaded: Value,
    arr: Value,
    index: Sequence[Value],
    order: Sequence[int] | None,
    fill: Emulated,
    loc: Location,
) -> Value:
    """`loaded` (a tile loaded with padding 0 at tile coordinates `index`) with `fill` in the
    elements outside `arr`."""
    shape = tile_type(loaded).shape
    inside: Value | None = None
    for d, size in enumerate(shape):
        axis = order[d] if order is not None else d
        along = tuple(size if i == d else 1 for i in range(len(shape)))
        iota = lw.emit(ops.Reshape(lw.emit(ops.Iota(size, dtypes.i32, loc)), along, loc))
        start = lw.binary("mul", index[d], Weak(size), loc)
        coord = lw.binary("add", lw.broadcast_to(start, along, loc), iota, loc)
        extent = lw.emit(ops.ArrayDim(arr, axis, loc))
        ok = lw.binary(
            "and", lw.compare("ge", coord, Weak(0), loc), lw.compare("lt", coord, extent, loc), loc
        )
        inside = ok if inside is None else lw.binary("and", inside, ok, loc)
    if inside is None:  # a 0-d array has no outside
        return loaded
    mask = lw.broadcast_to(inside, shape, loc)
    return lw.emit(ops.Select(mask, loaded, lw.broadcast_to(fill.value, shape, loc), loc))
