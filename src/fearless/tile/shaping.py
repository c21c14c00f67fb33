"""cuTile Python's `ct.ones`, `ct.extract`, `ct.cat`, `ct.bitcast`, `ct.static_assert`,
`ct.atan2`, `ct.isnan` and the function forms of the operators (`ct.add`, `ct.mul`,
`ct.bitwise_lshift`, `ct.equal`, `ct.less`, `ct.negative`, `ct.bitwise_not`, `ct.matmul`, ...):
the rules of their `tile.*` namesakes, and static tile slices (`v[:, 32:64]`).

They are registered in lower_api.py's `HANDLERS` (imported there); their stubs are in api.py.

    extract         the sub-tile of `shape` at `index` of a tile, `index` counted in units of
                    `shape` (cuTile's and Tile IR's `extract`). The index is a compile-time
                    tuple, checked against the tile here, so an extract never reads outside it.
    bitcast         the same bits as another dtype of the same width (Tile IR's `bitcast`).
    static_assert   a compile-time condition; false is a CompileError at its line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import dtypes
from ..dtypes import DType
from ..errors import CompileError, KernelTypeError, Location
from ..frontend.values import PyObj, Weak
from ..ir.core import Value
from ..ir.tile import ops
from ..ir.tile.types import TileType, tile_type
from .rules import TileRules

LocOf = Callable[[str], Location]


def api_ones(lw: TileRules, loc_of: LocOf, shape: Any, dtype: Any) -> Value:
    shp = lw.static_shape(shape, loc_of("shape"))
    dt = lw.static_dtype(dtype, loc_of("dtype"))
    return lw.const(lw.literal(Weak(1), dt, loc_of("shape")), dt, loc_of("shape"), shp)


def api_extract(lw: TileRules, loc_of: LocOf, x: Any, index: Any, shape: Any) -> Value:
    v = lw.tile_value(x, loc_of("x"))
    vshape = tile_type(v).shape
    shp = lw.static_shape(shape, loc_of("shape"))
    items = index if isinstance(index, tuple) else (index,)
    idx = tuple(lw.static_int(i, loc_of("index"), "the index of `tile.extract`") for i in items)
    if len(shp) != len(vshape) or len(idx) != len(vshape):
        raise KernelTypeError(
            f"`tile.extract` of a {len(vshape)}-d tile needs a {len(vshape)}-d index and shape, "
            f"got {idx} and {shp}",
            loc_of("index" if len(idx) != len(vshape) else "shape"),
        )
    for axis, (i, s, d) in enumerate(zip(idx, shp, vshape, strict=True)):
        if d % s:
            raise KernelTypeError(
                f"cannot extract tiles of shape {shp} from a tile of shape {vshape}: "
                f"{s} does not divide {d} (axis {axis})",
                loc_of("shape"),
                help="the sub-tile's shape must divide the tile's, axis by axis",
            )
        if not 0 <= i < d // s:
            raise KernelTypeError(
                f"index {idx} is outside the {vshape} tile: axis {axis} has {d // s} "
                f"sub-tiles of {s}",
                loc_of("index"),
                label=f"0 <= index < {d // s}",
                help="the index counts sub-tiles of `shape`, not elements",
            )
    if shp == vshape:
        return v
    return lw.emit(ops.Extract(v, idx, shp, loc_of("x")))


def _operator(kind: str) -> Any:
    def rule(lw: TileRules, loc_of: LocOf, x: Any, y: Any) -> Any:
        return lw.binary(kind, x, y, loc_of("x"))

    return rule


api_add, api_sub, api_mul = _operator("add"), _operator("sub"), _operator("mul")
api_floordiv, api_mod, api_pow = _operator("floordiv"), _operator("mod"), _operator("pow")
api_bitwise_lshift, api_bitwise_rshift = _operator("shl"), _operator("shr")
api_matmul = _operator("matmul")


def _comparison(pred: str) -> Any:
    def rule(lw: TileRules, loc_of: LocOf, x: Any, y: Any) -> Any:
        return lw.compare(pred, x, y, loc_of("x"))

    return rule


api_equal, api_not_equal = _comparison("eq"), _comparison("ne")
api_less, api_less_equal = _comparison("lt"), _comparison("le")
api_greater, api_greater_equal = _comparison("gt"), _comparison("ge")


def api_negative(lw: TileRules, loc_of: LocOf, x: Any) -> Value:
    loc = loc_of("x")
    return lw.emit(ops.Unary("neg", lw.tile_value(x, loc), loc))


def api_bitwise_not(lw: TileRules, loc_of: LocOf, x: Any) -> Value:
    """`~x`: `not` of a bool tile, every bit flipped (x ^ all ones) of an integer one."""
    loc = loc_of("x")
    v = lw.tile_value(x, loc)
    t = tile_type(v)
    if t.dtype.is_bool:
        return lw.emit(ops.Unary("not", v, loc))
    if not t.dtype.is_int:
        raise KernelTypeError(
            f"`tile.bitwise_not` flips the bits of integer or bool tiles, found {t}", loc
        )
    ones = Weak(-1 if t.dtype.is_signed else (1 << t.dtype.bits) - 1)
    mask = lw.broadcast_to(lw.tile_value(ones, loc, t.dtype), t.shape, loc)
    return lw.emit(ops.Binary("xor", v, mask, loc))


def api_isnan(lw: TileRules, loc_of: LocOf, x: Any) -> Value:
    """`x != x` for a float tile (only NaN differs from itself); all False for an integer one."""
    loc = loc_of("x")
    v = lw.tile_value(x, loc)
    t = tile_type(v)
    if t.dtype.is_float:
        return lw.emit(ops.Compare("ne", v, v, loc))
    return lw.emit(ops.Constant(False, TileType(dtypes.bool_, t.shape), loc))


def float_operands(
    lw: TileRules, x: Any, y: Any, loc: Location, what: str, also: str = ""
) -> tuple[DType, Value, Value]:
    """The dtype and tile values of `tile.<what>(x, y)`'s float operands; integer ones are
    E0308 (`also`: another way to write it, for the help)."""
    dt = lw.unify(x, y, loc, f"`tile.{what}`")
    if not dt.is_float:
        raise KernelTypeError(
            f"`tile.{what}` takes float tiles, found {dt.name}",
            loc,
            help=f"convert them first (`x.astype(fl.f32)`){also}",
        )
    a, b = lw.operands([x, y], dt, loc)
    return dt, a, b


def api_atan2(lw: TileRules, loc_of: LocOf, x1: Any, x2: Any) -> Value:
    _, a, b = float_operands(lw, x1, x2, loc_of("x1"), "atan2")
    return lw.emit(ops.Binary("atan2", a, b, loc_of("x1")))


def api_static_iter(lw: TileRules, loc_of: LocOf, iterable: Any) -> Any:
    raise CompileError(
        "`tile.static_iter(...)` is only the iterable of a `for` loop",
        loc_of("iterable"),
        help="write `for i in tile.static_iter(range(n)):`",
    )


def api_cat(lw: TileRules, loc_of: LocOf, tiles: Any, axis: Any) -> Value:
    if not (isinstance(tiles, tuple) and len(tiles) == 2):
        raise CompileError(
            "`tile.cat` takes a pair of tiles, `tile.cat((x, y), axis)`", loc_of("tiles")
        )
    a, b = (lw.tile_value(t, loc_of("tiles")) for t in tiles)
    ta, tb = tile_type(a), tile_type(b)
    ax = lw.static_int(axis, loc_of("axis"), "the axis of `tile.cat`")
    ax = ax + ta.ndim if ax < 0 else ax
    joined = list(ta.shape)
    ok = ta.ndim == tb.ndim and 0 <= ax < ta.ndim and ta.dtype == tb.dtype
    if ok:
        joined[ax] += tb.shape[ax]
        ok = all(d == e for i, (d, e) in enumerate(zip(ta.shape, tb.shape, strict=True)) if i != ax)
    if not ok:
        raise KernelTypeError(
            f"cannot concatenate a {ta} and a {tb} along axis {ax}",
            loc_of("tiles"),
            help="the tiles need one dtype and the same extents on the other axes",
        )
    lw.static_shape(tuple(Weak(d) for d in joined), loc_of("tiles"), "the concatenated shape")
    return lw.emit(ops.Cat(a, b, ax, loc_of("tiles")))


def api_bitcast(lw: TileRules, loc_of: LocOf, x: Any, dtype: Any) -> Value:
    v = lw.tile_value(x, loc_of("x"))
    src, dst = tile_type(v).dtype, lw.static_dtype(dtype, loc_of("dtype"))
    if src.is_bool or dst.is_bool or src.bits != dst.bits:
        raise KernelTypeError(
            f"cannot bitcast {src.name} to {dst.name}: a bitcast keeps the width",
            loc_of("dtype"),
            help="bitcast between types of one width (f32 and i32, bf16 and u16); convert "
            "values with `.astype(...)`",
        )
    return v if src == dst else lw.emit(ops.Bitcast(v, dst, loc_of("x")))


def api_static_assert(lw: TileRules, loc_of: LocOf, cond: Any, msg: Any) -> PyObj:
    if isinstance(cond, PyObj):
        cond = Weak(bool(cond.obj))
    if not isinstance(cond, Weak):
        raise CompileError(
            "`tile.static_assert` needs a condition known at compile time",
            loc_of("cond"),
            help="compare Consts, shapes and dtypes (`BM % 16 == 0`, `x.dtype == fl.f16`); "
            "check run-time values on the host",
        )
    if not cond.value:
        text = msg.obj if isinstance(msg, PyObj) and isinstance(msg.obj, str) else None
        raise CompileError(f"static assertion failed{': ' + text if text else ''}", loc_of("cond"))
    return PyObj(None, "None")


def slice_tile(lw: TileRules, v: Value, index: Any, loc: Location) -> Value:
    """`x[a:b, i, :]` of a tile with compile-time bounds: `tile.extract` of the window (each
    axis's window a power of two that divides the axis and starts at a multiple of its size),
    the axes indexed by an int dropped. `index` is the evaluated subscript: per axis a Python
    `slice` of compile-time ints or an int, fewer items (the rest whole), and one `...` at most
    (the axes not written, whole)."""
    shape = tile_type(v).shape
    items = list(index) if isinstance(index, tuple) else [index]
    dots = [i for i, item in enumerate(items) if item is Ellipsis]
    if len(dots) > 1:
        raise KernelTypeError(
            "a tile index takes one `...` at most", loc, help="write `v[..., 0]` or `v[0, ...]`"
        )
    if dots:  # `...` stands for the axes not written, whole
        items[dots[0] : dots[0] + 1] = [slice(None)] * max(0, len(shape) - len(items) + 1)
    if len(items) > len(shape):
        raise KernelTypeError(
            f"too many indices for a {len(shape)}-d tile: {len(items)}",
            loc,
            code="E0308",
            help=f"a {len(shape)}-d tile takes one index per axis, {len(shape)} at most",
        )
    items += [slice(None)] * (len(shape) - len(items))
    starts, sizes, kept = [], [], []
    for axis, (item, d) in enumerate(zip(items, shape, strict=True)):
        if isinstance(item, int):
            lo, hi = item + d if item < 0 else item, (item + d if item < 0 else item) + 1
        else:
            if item.step not in (None, 1):
                raise CompileError("a tile slice takes no step", loc, help="slice with `a:b`")
            lo, hi, _ = item.indices(d)
            kept.append(hi - lo)
        size = hi - lo
        if isinstance(item, int) and not 0 <= lo < d:
            raise KernelTypeError(
                f"index {item} is out of range for axis {axis} of a {shape} tile",
                loc,
                label="outside the tile",
                help=f"index axis {axis} with {-d} to {d - 1}",
            )
        if size <= 0:
            written = ":".join("" if b is None else str(b) for b in (item.start, item.stop))
            raise KernelTypeError(
                f"the window [{written}] of axis {axis} of a {shape} tile is empty",
                loc,
                label="an empty window",
                help="a tile slice is a power-of-two window that divides the axis and starts "
                "at a multiple of its size: a tile has no empty slice",
            )
        if not 0 <= lo < hi <= d or d % size or lo % size:
            raise KernelTypeError(
                f"cannot take [{lo}:{hi}] of axis {axis} of a {shape} tile",
                loc,
                label="not a window of the tile",
                help="a tile slice is a power-of-two window that divides the axis and starts "
                f"at a multiple of its size (e.g. [{size * (lo // size)}:"
                f"{size * (lo // size + 1)}]); compute elsewhere with `tile.where`",
            )
        starts.append(lo // size)
        sizes.append(size)
    out = v
    if tuple(sizes) != shape:
        out = lw.emit(ops.Extract(v, tuple(starts), tuple(sizes), loc))
    if len(kept) != len(shape):
        out = lw.emit(ops.Reshape(out, tuple(kept), loc))
    return out


HANDLERS: dict[str, Callable[..., Any]] = {
    name[len("api_") :]: handler
    for name, handler in list(globals().items())
    if name.startswith("api_") and callable(handler)
}
