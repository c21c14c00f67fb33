"""Element-wise addressing in Tile kernels: `tile.gather`, `tile.scatter` and the atomics, and
the atomics that name a whole tile, `tile.atomic_store_add` and its kin.

cuTile Python's names and meaning: `indices` is one integer tile (or scalar) per axis of the
array, broadcast together (a 1-D array takes one tile instead of a tuple); the result has
their common shape. Every access is bounds-checked: coordinates outside the array (negative
ones included) read `padding`, and writes there are dropped. `mask=` (a bool tile
broadcastable to that shape) switches elements off the same way.

Safety (DESIGN 2b): a gather only reads, so it takes a `tile.Tensor`. A Part is refused (other
blocks own its other tiles, and the gather names any element), and so is a `tile.Atomic` (other
blocks update it while this one reads). Writing at computed coordinates could hit any block's
elements, so `tile.scatter` and the atomics take only a `tile.Atomic[T]` parameter: an output
the borrow check keeps apart from every other argument, updated by atomic read-modify-writes
(the old values come back; ordered acq_rel unless `memory_order=` says otherwise, as cuTile
Python's) and relaxed stores, which never tear. Which dtypes each atomic takes
follows Tile IR: add on 32- and 64-bit ints and floats (and f16/bf16), max/min/and/or/xor on
32- and 64-bit ints, xchg and cas on 32- and 64-bit ints and floats.

`tile.atomic_store_add(t, index, value)` (cuTile Python's `TiledView.atomic_store_add`) adds a
tile into tile `index` of `t`, tiles of `value`'s shape counted as `tile.load` counts them:
the accumulation of one tile's partial sums (flash attention's dQ, a split-K GEMM) as one
view-based reduction, which tileiras may issue in bulk, instead of per-element coordinates.
`atomic_store_max`, `_min`, `_and`, `_or` and `_xor` do the same with their operation. Each
takes the same `tile.Atomic` parameter and the dtypes of its `tile.atomic_<mode>`, is relaxed
(Tile IR allows no other order for it) and returns nothing; what falls outside is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import dtypes
from ..errors import CompileError, KernelTypeError, Location, SafetyError
from ..frontend.values import PyObj, Weak
from ..ir.core import Value
from ..ir.tile import ops
from ..ir.tile.types import ArrayParamType, tile_type
from .api import MemoryOrder
from .lower_api import array_param, enum_option, readable
from .rules import Operand, TileRules

LocOf = Callable[[str], Location]

_WIDE = ("i32", "u32", "i64", "u64")
_WIDE_FLOAT = (*_WIDE, "f32", "f64")
# Which element dtypes each atomic takes (cuTile Python's table, from what Tile IR lowers)
_ATOMIC_DTYPES = {
    "add": (*_WIDE_FLOAT, "f16", "bf16"),
    "max": _WIDE,
    "min": _WIDE,
    "and": _WIDE,
    "or": _WIDE,
    "xor": _WIDE,
    "xchg": _WIDE_FLOAT,
    "cas": _WIDE_FLOAT,
}


def _coordinates(
    lw: TileRules, at: ArrayParamType, name: str, indices: Any, loc: Location
) -> tuple[list[Value], tuple[int, ...]]:
    """One integer tile per axis, broadcast to their common shape, and that shape."""
    idx = indices if isinstance(indices, tuple) else (indices,)
    if len(idx) != at.ndim:
        one = " (or one tile for a 1-D array)" if at.ndim == 1 else ""
        raise KernelTypeError(
            f"`{name}` has {at.ndim} dimension(s), so `indices` needs {at.ndim} entries{one}, "
            f"got {len(idx)}",
            loc,
            help="pass a tuple with one integer tile per axis: `(rows[:, None], cols[None, :])`",
        )
    values = []
    for axis, i in enumerate(idx):
        v = lw.tile_value(i, loc, dtypes.i32)
        t = tile_type(v)
        if not t.dtype.is_int or t.dtype.is_bool:
            raise KernelTypeError(
                f"coordinates must be integer tiles, but axis {axis}'s are {t.dtype.name}",
                loc,
                help="convert them: `idx.astype(fl.i32)`",
            )
        values.append(v)
    shape: tuple[int, ...] = ()
    for v in values:
        shape = lw.broadcast_shapes(shape, tile_type(v).shape, loc)
    return [lw.broadcast_to(v, shape, loc) for v in values], shape


def _mask(lw: TileRules, mask: Any, shape: tuple[int, ...], loc: Location) -> Value | None:
    if isinstance(mask, PyObj) and mask.obj is None:
        return None
    if isinstance(mask, Weak) and isinstance(mask.value, bool):
        return None if mask.value else lw.const(False, dtypes.bool_, loc, shape)
    v = lw.tile_value(mask, loc)
    if tile_type(v).dtype != dtypes.bool_:
        raise KernelTypeError(
            f"`mask` must be a bool tile, found {tile_type(v)}",
            loc,
            help="compare to make one: `mask=cols < n`",
        )
    return lw.broadcast_to(v, shape, loc)


def _typed(lw: TileRules, x: Any, arr: Value, at: ArrayParamType, loc: Location) -> Value:
    """`x` as a tile of array `arr`'s dtype: a tile of it, or a number it holds."""
    v = lw.tile_value(x, loc, at.dtype)
    if tile_type(v).dtype != at.dtype:
        raise KernelTypeError(
            f"the values are {tile_type(v).dtype.name} but `{arr.name}` holds {at.dtype.name}",
            loc,
            help=f"convert them: `x.astype(fl.{at.dtype.name})`",
        )
    return v


def _values(
    lw: TileRules, x: Any, arr: Value, at: ArrayParamType, shape: tuple[int, ...], loc: Location
) -> Value:
    """`x` (a tile of the array's dtype, or a number it holds) at the coordinates' shape."""
    return lw.broadcast_to(_typed(lw, x, arr, at, loc), shape, loc)


def api_gather(
    lw: TileRules, loc_of: LocOf, t: Any, indices: Any, mask: Any, padding: Any
) -> Value:
    arr, at = readable(t, loc_of("t"), "gather", unsafe=lw.unsafe_depth > 0)
    coords, shape = _coordinates(lw, at, arr.name, indices, loc_of("indices"))
    m = _mask(lw, mask, shape, loc_of("mask"))
    if at.dtype.is_bool:  # the default 0 reads False
        if not isinstance(padding, Weak) or padding.value not in (0, 1):
            raise CompileError(
                f"the padding of `tile.gather` of the bool array `{arr.name}` must be True or "
                "False",
                loc_of("padding"),
                help="e.g. `padding=False` (the default)",
            )
        return lw.emit(ops.Gather(arr, coords, m, bool(padding.value), loc_of("t")))
    if not isinstance(padding, Weak) or isinstance(padding.value, bool):
        raise CompileError(
            "the padding of `tile.gather` must be a number written in the kernel",
            loc_of("padding"),
            help="e.g. `padding=0` or `padding=-math.inf`",
        )
    pad = lw.literal(padding, at.dtype, loc_of("padding"))
    return lw.emit(ops.Gather(arr, coords, m, pad, loc_of("t")))


def _atomic_array(lw: TileRules, t: Any, loc: Location, what: str) -> tuple[Value, ArrayParamType]:
    arr, at = array_param(t, loc, f"the first argument of `tile.{what}`")
    if at.is_part and lw.unsafe_depth:  # `with tile.unsafe():` (regions.py)
        return arr, at
    if not at.atomic:
        kind = "a Part" if at.is_part else "a read-only Tensor"
        raise SafetyError(
            f"`tile.{what}` writes at computed coordinates, but `{arr.name}` is {kind}",
            loc,
            code="E0611",
            help=f"declare the parameter `{arr.name}: tile.Atomic[fl.{at.dtype.name}]` (an output "
            "any block may update, kept apart from every other argument), and launch with "
            "`kernel.launch(grid, ...)` when it is the only output"
            + (", or write the Part inside `with tile.unsafe():`" if at.is_part else ""),
        )
    return arr, at


def api_scatter(lw: TileRules, loc_of: LocOf, t: Any, indices: Any, value: Any, mask: Any) -> None:
    arr, at = _atomic_array(lw, t, loc_of("t"), "scatter")
    coords, shape = _coordinates(lw, at, arr.name, indices, loc_of("indices"))
    m = _mask(lw, mask, shape, loc_of("mask"))
    v = _values(lw, value, arr, at, shape, loc_of("value"))
    lw.emit(ops.Scatter(arr, v, coords, m, loc_of("t")))


def _rmw(mode: str) -> Callable[..., Value]:
    def handler(
        lw: TileRules,
        loc_of: LocOf,
        t: Any,
        indices: Any,
        value: Any,
        mask: Any,
        memory_order: Any,
    ) -> Value:
        arr, at = _atomic_array(lw, t, loc_of("t"), f"atomic_{mode}")
        _check_dtype(mode, at, loc_of("t"))
        coords, shape = _coordinates(lw, at, arr.name, indices, loc_of("indices"))
        m = _mask(lw, mask, shape, loc_of("mask"))
        v = _values(lw, value, arr, at, shape, loc_of("value"))
        order = _order(memory_order, loc_of("memory_order"))
        return lw.emit(ops.AtomicRMW(arr, v, coords, m, mode, loc_of("t"), order))

    handler.__name__ = f"api_atomic_{mode}"
    return handler


def _store_rmw(mode: str) -> Callable[..., None]:
    def handler(lw: TileRules, loc_of: LocOf, t: Any, index: Any, value: Any) -> None:
        _atomic_store(lw, loc_of, t, index, value, mode)

    handler.__name__ = f"api_atomic_store_{mode}"
    return handler


def _atomic_store(lw: TileRules, loc_of: LocOf, t: Any, index: Any, value: Any, mode: str) -> None:
    """`tile.atomic_store_<mode>(t, index, value)`: the checks, then one AtomicStore."""
    arr, at = _atomic_array(lw, t, loc_of("t"), f"atomic_store_{mode}")
    _check_dtype(mode, at, loc_of("t"), f"atomic_store_{mode}")
    v = _typed(lw, value, arr, at, loc_of("value"))
    idx = index if isinstance(index, tuple) else (index,)
    for what, n, where in (
        ("index", len(idx), "index"),
        ("tile", len(tile_type(v).shape), "value"),
    ):
        if n != at.ndim:
            raise KernelTypeError(
                f"`{arr.name}` has {at.ndim} dimension(s), but the {what} has {n}",
                loc_of(where),
                help="the tile's shape names the tiles `index` counts, one entry per axis of the "
                "array: reshape it first, e.g. `acc.reshape((1, 1, TILE_M, TILE_D))`",
            )
    coords = [lw.index(i, loc_of("index")) for i in idx]
    lw.emit(ops.AtomicStore(arr, v, coords, mode, loc_of("t")))


def _check_dtype(mode: str, at: ArrayParamType, loc: Location, name: str = "") -> None:
    allowed = _ATOMIC_DTYPES[mode]
    if at.dtype.name not in allowed:
        raise KernelTypeError(
            f"`tile.{name or 'atomic_' + mode}` does not take {at.dtype.name} arrays",
            loc,
            help=f"it takes {', '.join(allowed)}",
        )


def api_atomic_cas(
    lw: TileRules,
    loc_of: LocOf,
    t: Any,
    indices: Any,
    expected: Any,
    desired: Any,
    mask: Any,
    memory_order: Any,
) -> Value:
    arr, at = _atomic_array(lw, t, loc_of("t"), "atomic_cas")
    _check_dtype("cas", at, loc_of("t"))
    coords, shape = _coordinates(lw, at, arr.name, indices, loc_of("indices"))
    m = _mask(lw, mask, shape, loc_of("mask"))
    e = _values(lw, expected, arr, at, shape, loc_of("expected"))
    d = _values(lw, desired, arr, at, shape, loc_of("desired"))
    order = _order(memory_order, loc_of("memory_order"))
    return lw.emit(ops.AtomicCAS(arr, e, d, coords, m, loc_of("t"), order))


def _order(memory_order: Any, loc: Location) -> str:
    """An atomic's `memory_order=` as the IR's attribute: "acq_rel" (the default), "relaxed",
    "acquire" or "release"."""
    order = enum_option(memory_order, MemoryOrder, "memory_order", loc, "memory order")
    return "acq_rel" if order is None else order.value


HANDLERS: dict[str, Callable[..., Operand]] = {
    "gather": api_gather,
    "scatter": api_scatter,
    "atomic_cas": api_atomic_cas,
    **{f"atomic_store_{m}": _store_rmw(m) for m in ("add", "max", "min", "and", "or", "xor")},
    **{f"atomic_{m}": _rmw(m) for m in ("add", "max", "min", "xchg", "and", "or", "xor")},
}
