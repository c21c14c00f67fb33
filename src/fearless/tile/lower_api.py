"""The frontend's handlers for each `tile.*` function: check the arguments, emit tile IR ops.

`api_<name>(lw, loc_of, **arguments)` receives the call's operands bound to the stub's
signature (api.py); `loc_of(param)` is where that argument is written, for diagnostics.
`HANDLERS` maps each function's name to its handler (frontend.py, `TileLowerer.call_api`);
the random-number handlers live in random.py and join it by the import below, shaping.py's
(ones, extract, cat, bitcast, static_assert, the operators' function forms) by its HANDLERS,
special.py's (erf, composed of tile ops) by its own.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from typing import Any, TypeVar

from .. import dtypes
from ..errors import CompileError, KernelTypeError, Location, SafetyError
from ..frontend.values import PyObj, Weak
from ..ir.core import Value
from ..ir.tile import ops
from ..ir.tile.types import ArrayParamType, tile_type
from .api import RoundingMode
from .load_padding import Emulated, padding_of
from .load_padding import pad as emulate_padding
from .order import own_index
from .persistent import TileCursor
from .random import api_philox, api_rand, api_randint, api_randint4x, api_randn  # noqa: F401
from .rules import Operand, TileRules, absent_error
from .shaping import HANDLERS as SHAPING
from .shaping import float_operands
from .special import HANDLERS as SPECIAL

LocOf = Callable[[str], Location]


def array_param(x: Any, loc: Location, what: str) -> tuple[Value, ArrayParamType]:
    """`x` as an array parameter of the kernel, or the error that it is not one."""
    if isinstance(x, Value) and isinstance(x.type, ArrayParamType):
        return x, x.type
    if isinstance(x, PyObj) and x.obj is None:
        raise absent_error(x, loc, f"{what} is None, not an array")
    raise KernelTypeError(
        f"{what} must be an array parameter of the kernel",
        loc,
        help="pass the kernel parameter itself (`x`), not a tile loaded from it",
    )


def readable(
    x: Any, loc: Location, fn: str, part_ok: bool = False, unsafe: bool = False
) -> tuple[Value, ArrayParamType]:
    """The array `tile.<fn>` reads: never a `tile.Atomic` (E0610) outside `with
    tile.unsafe():` (inside, a lock's critical section may read what it guards), nor a Part
    unless `part_ok` (its other tiles are other blocks', E0601)."""
    arr, at = array_param(x, loc, f"the first argument of `tile.{fn}`")
    if at.atomic and not unsafe:
        raise SafetyError(
            f"`{arr.name}` is a `tile.Atomic`: other blocks update it while this one runs, so it "
            "cannot be read with a plain load",
            loc,
            code="E0610",
            help="the atomics return the values they replaced (`old = tile.atomic_add(...)`); "
            "a read that a lock orders goes inside `with tile.unsafe():`",
        )
    if at.is_part and not part_ok:
        raise SafetyError(
            f"`tile.{fn}` cannot read `{arr.name}`, a Part: other blocks own its other tiles",
            loc,
            code="E0601",
            help=f"read this block's own tile with `tile.load_like({arr.name}, {arr.name})`",
        )
    return arr, at


def _axis(lw: TileRules, axis: Any, ndim: int, loc: Location) -> int:
    a = lw.static_int(axis, loc, "an axis")
    if not -ndim <= a < ndim:
        raise CompileError(f"axis {a} is out of range for a {ndim}-d tile", loc)
    return a % ndim


def memory_hints(lw: TileRules, loc_of: LocOf, latency: Any, allow_tma: Any) -> dict[str, Any]:
    """The tileiras hints of a load or store: `latency` 1-10 or None, `allow_tma` a bool (both
    static)."""
    lat = None
    if not (isinstance(latency, PyObj) and latency.obj is None):
        lat = lw.static_int(latency, loc_of("latency"), "the `latency` hint")
        if not 1 <= lat <= 10:
            raise CompileError(
                f"the `latency` hint must be between 1 and 10, got {lat}",
                loc_of("latency"),
                help="tileiras reads it as a relative cost: 1 is a cache hit, 10 a slow DRAM read",
            )
    if not (isinstance(allow_tma, Weak) and isinstance(allow_tma.value, bool)):
        raise CompileError(
            "`allow_tma` must be a compile-time True or False",
            loc_of("allow_tma"),
            help="write `allow_tma=False` to keep this load or store off the TMA unit",
        )
    return {"latency": lat, "allow_tma": allow_tma.value}


def api_load(
    lw: TileRules,
    loc_of: LocOf,
    t: Any,
    index: Any,
    shape: Any,
    padding: Any,
    latency: Any,
    allow_tma: Any,
    order: Any,
) -> Value:
    arr, at = readable(t, loc_of("t"), "load", unsafe=lw.unsafe_depth > 0)
    idx = index if isinstance(index, tuple) else (index,)
    shp = lw.static_shape(shape, loc_of("shape"))
    nd = at.ndim
    if len(idx) != nd or len(shp) != nd:
        raise KernelTypeError(
            f"`{arr.name}` has {nd} dimension(s): the index and the shape need {nd} entries each",
            loc_of("index" if len(idx) != nd else "shape"),
        )
    index_values = [lw.index(i, loc_of("index")) for i in idx]
    pad = padding_of(lw, padding, at, loc_of("padding"))
    hints = memory_hints(lw, loc_of, latency, allow_tma)
    axes = _load_order(lw, order, nd, loc_of("order"))
    native = 0.0 if isinstance(pad, Emulated) else pad
    v = lw.emit(ops.Load(arr, index_values, shp, native, loc_of("t"), **hints, order=axes))
    if isinstance(pad, Emulated):
        return emulate_padding(lw, v, arr, index_values, axes, pad, loc_of("padding"))
    return v


def _load_order(lw: TileRules, order: Any, nd: int, loc: Location) -> tuple[int, ...] | None:
    """`order=` of `tile.load`: None, or a compile-time permutation of the tensor's nd axes."""
    if isinstance(order, PyObj) and order.obj is None:
        return None
    if nd > 1:
        swap = ", ".join(map(str, (*range(nd - 2), nd - 1, nd - 2)))
        help = (
            f"`order` gives, for each tile axis, the tensor axis it runs along: each of "
            f"0..{nd - 1} once, e.g. `order=({swap})` swaps the last two"
        )
    else:
        help = "a 1-d tensor has one axis order: leave `order` out"
    items = order if isinstance(order, tuple) else (order,)
    axes = tuple(lw.static_int(a, loc, "each axis of `order`") for a in items)
    if sorted(axes) != list(range(nd)):
        count = f"{len(axes)} axis" if len(axes) == 1 else f"{len(axes)} axes"
        what = f"has {count}" if len(axes) != nd else "is not a permutation"
        raise CompileError(
            f"`order={axes}` {what}: the tensor has {nd} dimension(s), so `order` must be a "
            f"permutation of {tuple(range(nd))}",
            loc,
            help=help,
        )
    return axes


def api_load_like(
    lw: TileRules,
    loc_of: LocOf,
    t: Any,
    part: Any,
    padding: Any,
    latency: Any,
    allow_tma: Any,
) -> Value:
    arr, at = readable(t, loc_of("t"), "load_like", part_ok=True, unsafe=lw.unsafe_depth > 0)
    cursor = part if isinstance(part, TileCursor) else None  # `tile.load_like(x, t)`
    if cursor is not None:
        part = cursor.part
    p, pt = array_param(part, loc_of("part"), "the second argument of `tile.load_like`")
    if not pt.is_part:
        raise KernelTypeError(f"`{p.name}` is not a `tile.Part`", loc_of("part"))
    if at.is_part and arr is not p:
        raise SafetyError(
            f"cannot read `{arr.name}` at `{p.name}`'s index: another block owns that tile",
            loc_of("t"),
            help=f"read `{arr.name}`'s own tile with `tile.load_like({arr.name}, {arr.name})`",
        )
    assert pt.tile is not None
    if at.ndim != pt.ndim:
        raise KernelTypeError(
            f"`{arr.name}` has {at.ndim} dimension(s) but `{p.name}`'s tiles have {pt.ndim}",
            loc_of("t"),
        )
    index = list(cursor.index if cursor is not None else own_index(lw, p, loc_of("part")))
    shape = cursor.tile if cursor is not None else pt.tile
    pad = padding_of(lw, padding, at, loc_of("padding"))
    hints = memory_hints(lw, loc_of, latency, allow_tma)
    native = 0.0 if isinstance(pad, Emulated) else pad
    v = lw.emit(ops.Load(arr, index, shape, native, loc_of("t"), **hints))
    if isinstance(pad, Emulated):
        return emulate_padding(lw, v, arr, index, None, pad, loc_of("padding"))
    return v


def _grid_axis(lw: TileRules, axis: Any, loc: Location) -> int:
    a = lw.static_int(axis, loc, "a grid axis")
    if a not in (0, 1, 2):
        raise CompileError(f"grid axis {a} does not exist: the grid has axes 0, 1 and 2", loc)
    return a


def api_block_id(lw: TileRules, loc_of: LocOf, axis: Any) -> Value:
    return lw.emit(ops.BlockId(_grid_axis(lw, axis, loc_of("axis")), loc_of("axis")))


def api_num_blocks(lw: TileRules, loc_of: LocOf, axis: Any) -> Value:
    return lw.emit(ops.NumBlocks(_grid_axis(lw, axis, loc_of("axis")), loc_of("axis")))


def api_cdiv(lw: TileRules, loc_of: LocOf, a: Any, b: Any) -> Operand:
    """cuTile's `cdiv`: `ceil(a / b)` for either sign, without overflow (`rules.ceil_div`)."""
    return lw.ceil_div(a, b, loc_of("a"))


def api_num_tiles(lw: TileRules, loc_of: LocOf, t: Any, axis: Any, shape: Any) -> Operand:
    arr, at = array_param(t, loc_of("t"), "the first argument of `tile.num_tiles`")
    ax = _axis(lw, axis, at.ndim, loc_of("axis"))
    shp = lw.static_shape(shape, loc_of("shape"))
    extent = lw.emit(ops.ArrayDim(arr, ax, loc_of("t")))
    # an extent (>= 0) by a power-of-two tile: `(extent + t - 1) // t`, which overflows only
    # for an extent within t of 2**31
    loc = loc_of("a")
    t = Weak(shp[ax])
    return lw.binary(
        "floordiv", lw.binary("sub", lw.binary("add", extent, t, loc), Weak(1), loc), t, loc
    )


def api_zeros(lw: TileRules, loc_of: LocOf, shape: Any, dtype: Any) -> Value:
    return api_full(lw, loc_of, shape, Weak(0), dtype)


def api_full(lw: TileRules, loc_of: LocOf, shape: Any, value: Any, dtype: Any) -> Value:
    shp = lw.static_shape(shape, loc_of("shape"))
    dt = lw.static_dtype(dtype, loc_of("dtype"))
    if isinstance(value, Weak):
        return lw.const(lw.literal(value, dt, loc_of("value")), dt, loc_of("shape"), shp)
    v = lw.tile_value(value, loc_of("value"), dt)
    if tile_type(v).dtype != dt:
        v = lw.emit(ops.Cast(v, dt, loc_of("value")))
    return lw.broadcast_to(v, shp, loc_of("value"))


def api_arange(lw: TileRules, loc_of: LocOf, n: Any, dtype: Any) -> Value:
    (size,) = lw.static_shape((n,), loc_of("n"), "the length of `tile.arange`")
    dt = (
        dtypes.i32
        if isinstance(dtype, PyObj) and dtype.obj is None
        else lw.static_dtype(dtype, loc_of("dtype"))
    )
    if dt.is_bool:
        raise KernelTypeError(
            f"`tile.arange` counts in a number dtype, not {dt.name}",
            loc_of("dtype"),
            help="count in i32 (the default) and compare, e.g. `tile.arange(n) < k` for a "
            "bool tile",
        )
    if dt.is_float:
        v = lw.emit(ops.Iota(size, dtypes.i32, loc_of("n")))
        return lw.emit(ops.Cast(v, dt, loc_of("n")))
    return lw.emit(ops.Iota(size, dt, loc_of("n")))


def _unary(kind: str, float_only: bool = True) -> Callable[..., Value]:
    def handler(lw: TileRules, loc_of: LocOf, x: Any) -> Value:
        return lw.emit(
            ops.Unary(kind, _unary_operand(lw, loc_of, kind, x, float_only), loc_of("x"))
        )

    return handler


def _unary_operand(lw: TileRules, loc_of: LocOf, kind: str, x: Any, float_only: bool) -> Value:
    loc = loc_of("x")
    v = lw.tile_value(x, loc, dtypes.f32 if float_only else None)
    if float_only and not tile_type(v).dtype.is_float:
        raise KernelTypeError(
            f"`tile.{kind}` needs a float tile, found {v.type}",
            loc,
            help="convert it first: `x.astype(fl.f32)`",
        )
    return v


def api_exp2(lw: TileRules, loc_of: LocOf, x: Any, flush_to_zero: Any) -> Value:
    help = "write `tile.exp2(x, flush_to_zero=True)`"
    return _flagged_unary(lw, loc_of, "exp2", x, "flush_to_zero", flush_to_zero, help)


def api_truediv(
    lw: TileRules, loc_of: LocOf, a: Any, b: Any, rounding_mode: Any, flush_to_zero: Any
) -> Value:
    loc = loc_of("a")
    dt, va, vb = float_operands(lw, a, b, loc, "truediv", ", or use `//` for integers")
    mode = _rounding_mode(rounding_mode, loc_of("rounding_mode"))
    rounding = None if mode is None or mode is RoundingMode.NEAREST_EVEN else mode.value
    if mode is not None and rounding is not None and dt != dtypes.f32:
        raise KernelTypeError(
            f"`tile.truediv(..., rounding_mode=tile.RoundingMode.{mode.name})` is for f32 "
            f"tiles, found {dt.name}",
            loc,
            help="convert them first: `x.astype(fl.f32)`",
        )
    help = "write `tile.truediv(a, b, flush_to_zero=True)`"
    ftz = _f32_flag(lw, loc_of, "truediv", "flush_to_zero", flush_to_zero, va, help)
    attrs: dict[str, Any] = {"rounding": rounding} if rounding else {}
    if ftz:
        attrs["flush_to_zero"] = True
    return lw.emit(ops.Binary("div", va, vb, loc, **attrs))


def _rounding_mode(x: Any, loc: Location) -> RoundingMode | None:
    """`rounding_mode=` of `tile.truediv` (`enum_option`'s, as cuTile Python's
    `rounding_mode="approx"`)."""
    return enum_option(x, RoundingMode, "rounding_mode", loc, "rounding mode")


E = TypeVar("E", bound=enum.Enum)


def enum_option(x: Any, kind: type[E], arg: str, loc: Location, what: str) -> E | None:
    """A compile-time option `arg=` of a tile function: None, a member of the enum `kind`
    (`tile.RoundingMode`, `tile.MemoryOrder`), or a member's name as a string in any case;
    `what` names one in errors ("rounding mode")."""
    value = x.obj if isinstance(x, PyObj) else x
    if value is None or isinstance(value, kind):
        return value
    names = ", ".join(f'"{m.name.lower()}"' for m in kind)
    example = f"{arg}=tile.{kind.__name__}.{next(iter(kind)).name}"
    if isinstance(value, str):
        found = next((m for m in kind if value.lower() == m.name.lower()), None)
        if found is not None:
            return found
        raise CompileError(
            f"`{arg}={value!r}` is not a {what}: the {what.split()[-1]}s are {names}",
            loc,
            help=f"or the enum, e.g. `{example}`",
        )
    raise CompileError(
        f"`{arg}` must be a `tile.{kind.__name__}` or its name, known at compile time",
        loc,
        help=f"e.g. `{example}` or one of {names}",
    )


def api_exp(lw: TileRules, loc_of: LocOf, x: Any, approx: Any) -> Value:
    help = "write `tile.exp(x, approx=True)` for the fast hardware exp"
    return _flagged_unary(lw, loc_of, "exp", x, "approx", approx, help)


def api_tanh(lw: TileRules, loc_of: LocOf, x: Any, approx: Any) -> Value:
    help = "write `tile.tanh(x, approx=True)` for the hardware's tanh"
    return _flagged_unary(lw, loc_of, "tanh", x, "approx", approx, help)


def _flagged_unary(
    lw: TileRules, loc_of: LocOf, kind: str, x: Any, flag: str, value: Any, help: str
) -> Value:
    """`tile.<kind>(x, <flag>=value)` of a float tile, `flag` an f32-only option (`_f32_flag`)."""
    v = _unary_operand(lw, loc_of, kind, x, True)
    on = _f32_flag(lw, loc_of, kind, flag, value, v, help)
    return lw.emit(ops.Unary(kind, v, loc_of("x"), **{flag: on}))


def _f32_flag(
    lw: TileRules, loc_of: LocOf, fn: str, flag: str, value: Any, v: Value, help: str
) -> bool:
    """A `tile.<fn>(..., <flag>=...)` option: a compile-time bool, True only for f32 tiles."""
    if not (isinstance(value, Weak) and isinstance(value.value, bool)):
        raise CompileError(
            f"`{flag}` must be a compile-time True or False", loc_of(flag), help=help
        )
    if value.value and tile_type(v).dtype != dtypes.f32:
        raise KernelTypeError(
            f"`tile.{fn}(..., {flag}=True)` is for f32 tiles, found {v.type}",
            loc_of("x"),
            help="convert it first: `x.astype(fl.f32)`",
        )
    return value.value


api_log = _unary("log")
api_log2 = _unary("log2")
api_sqrt = _unary("sqrt")
api_rsqrt = _unary("rsqrt")
api_sin = _unary("sin")
api_cos = _unary("cos")
api_floor = _unary("floor")
api_ceil = _unary("ceil")
api_tan, api_sinh, api_cosh = _unary("tan"), _unary("sinh"), _unary("cosh")
api_bid = api_block_id  # cuTile's name
api_abs = _unary("abs", float_only=False)


def api_sigmoid(lw: TileRules, loc_of: LocOf, x: Any) -> Operand:
    loc = loc_of("x")
    v = lw.tile_value(x, loc, dtypes.f32)
    if not tile_type(v).dtype.is_float:
        raise KernelTypeError(f"`tile.sigmoid` needs a float tile, found {v.type}", loc)
    neg = lw.emit(ops.Unary("neg", v, loc))
    denom = lw.binary("add", Weak(1.0), lw.emit(ops.Unary("exp", neg, loc)), loc)
    return lw.binary("div", Weak(1.0), denom, loc)


def api_maximum(lw: TileRules, loc_of: LocOf, x: Any, y: Any) -> Operand:
    return lw.binary("max", x, y, loc_of("x"))


def api_minimum(lw: TileRules, loc_of: LocOf, x: Any, y: Any) -> Operand:
    return lw.binary("min", x, y, loc_of("x"))


def api_bitwise_and(lw: TileRules, loc_of: LocOf, x: Any, y: Any) -> Operand:
    return lw.binary("and", x, y, loc_of("x"))


def api_bitwise_or(lw: TileRules, loc_of: LocOf, x: Any, y: Any) -> Operand:
    return lw.binary("or", x, y, loc_of("x"))


def api_bitwise_xor(lw: TileRules, loc_of: LocOf, x: Any, y: Any) -> Operand:
    return lw.binary("xor", x, y, loc_of("x"))


def api_where(lw: TileRules, loc_of: LocOf, cond: Any, x: Any, y: Any) -> Value:
    loc = loc_of("cond")
    c = lw.tile_value(cond, loc, dtypes.bool_)
    if not tile_type(c).dtype.is_bool:
        raise KernelTypeError(f"the condition of `tile.where` must be bool, found {c.type}", loc)
    dt = lw.unify(x, y, loc_of("x"), "`tile.where`")  # two int literals: i32, as cuTile
    c, vx, vy = lw.operands(
        [c, lw.tile_value(x, loc_of("x"), dt), lw.tile_value(y, loc_of("y"), dt)], dt, loc
    )
    return lw.emit(ops.Select(c, vx, vy, loc))


def _reduce(kind: str) -> Callable[..., Value]:
    def handler(lw: TileRules, loc_of: LocOf, x: Any, axis: Any, keepdims: Any) -> Value:
        loc = loc_of("x")
        v = lw.tile_value(x, loc)
        vt = tile_type(v)
        if vt.dtype.is_bool:
            raise KernelTypeError(
                f"`tile.{kind}` of a bool tile", loc, help="convert with `.astype(fl.i32)`"
            )
        nd = vt.ndim
        if isinstance(axis, PyObj) and axis.obj is None:
            axes = list(range(nd))
        else:
            items = axis if isinstance(axis, tuple) else (axis,)
            axes = sorted({_axis(lw, a, nd, loc_of("axis")) for a in items})
            if len(axes) != len(items):
                written = tuple(lw.static_int(a, loc_of("axis"), "an axis") for a in items)
                raise KernelTypeError(
                    f"`tile.{kind}` names an axis twice in `axis={written}`",
                    loc_of("axis"),
                    label="a repeated axis",
                    help="name each axis once (as NumPy, which refuses a duplicate value in "
                    "`axis`); a negative axis counts from the end",
                )
        keep = isinstance(keepdims, Weak) and bool(keepdims.value)
        shape = vt.shape
        for a in reversed(axes):
            v = lw.emit(ops.Reduce(kind, v, a, loc))
        if keep:
            kept = tuple(1 if i in axes else d for i, d in enumerate(shape))
            v = lw.emit(ops.Reshape(v, kept, loc))
        return v

    return handler


api_sum = _reduce("sum")
api_prod = _reduce("prod")
api_max = _reduce("max")
api_min = _reduce("min")


def _arg_reduce(kind: str) -> Callable[..., Value]:
    """`tile.argmax` / `tile.argmin` (cuTile's): the i32 index of the first maximum (minimum)
    along `axis`, or in the row-major flattened tile when `axis` is None; a NaN counts as the
    extreme, as in NumPy. Written with existing ops: the reduction, then the least index that
    holds its value."""

    def handler(lw: TileRules, loc_of: LocOf, x: Any, axis: Any, keepdims: Any) -> Value:
        loc = loc_of("x")
        v = lw.tile_value(x, loc)
        if tile_type(v).dtype.is_bool:
            raise KernelTypeError(
                f"`tile.arg{kind}` of a bool tile", loc, help="convert with `.astype(fl.i32)`"
            )
        shape = tile_type(v).shape
        flat = isinstance(axis, PyObj) and axis.obj is None
        if flat:
            v = lw.emit(ops.Reshape(v, (math.prod(shape),), loc))
            a = 0
        else:
            a = _axis(lw, axis, len(shape), loc_of("axis")) % len(shape)
        t = tile_type(v)
        along = tuple(d if i == a else 1 for i, d in enumerate(t.shape))
        kept = tuple(1 if i == a else d for i, d in enumerate(t.shape))
        m = lw.emit(ops.Reshape(lw.emit(ops.Reduce(kind, v, a, loc)), kept, loc))
        hit = lw.compare("eq", v, lw.broadcast_to(m, t.shape, loc), loc)
        if t.dtype.is_float:
            hit = lw.binary("or", hit, lw.compare("ne", v, v, loc), loc)
        n = t.shape[a]
        iota = lw.emit(ops.Reshape(lw.emit(ops.Iota(n, dtypes.i32, loc)), along, loc))
        past = lw.broadcast_to(lw.tile_value(Weak(n), loc, dtypes.i32), t.shape, loc)
        cand = lw.emit(ops.Select(hit, lw.broadcast_to(iota, t.shape, loc), past, loc))
        r = lw.emit(ops.Reduce("min", cand, a, loc))
        if isinstance(keepdims, Weak) and bool(keepdims.value):
            r = lw.emit(ops.Reshape(r, (1,) * len(shape) if flat else kept, loc))
        return r

    return handler


def _scan(kind: str) -> Callable[..., Value]:
    def handler(lw: TileRules, loc_of: LocOf, x: Any, axis: Any, reverse: Any) -> Value:
        loc = loc_of("x")
        v = lw.tile_value(x, loc)
        t = tile_type(v)
        if t.dtype.is_bool or t.ndim == 0:
            what = "a bool tile" if t.dtype.is_bool else "a 0-d tile"
            raise KernelTypeError(f"`tile.cum{kind}` of {what}", loc)
        a = _axis(lw, axis, t.ndim, loc_of("axis")) % t.ndim
        if not isinstance(reverse, Weak) or not isinstance(reverse.value, bool):
            raise CompileError("`reverse=` takes True or False", loc_of("reverse"))
        return lw.emit(ops.Scan(kind, v, a, reverse.value, loc))

    return handler


api_cumsum = _scan("sum")
api_cumprod = _scan("prod")
api_argmax = _arg_reduce("max")
api_argmin = _arg_reduce("min")


def api_mma(lw: TileRules, loc_of: LocOf, a: Any, b: Any, acc: Any) -> Value:
    va = lw.tile_value(a, loc_of("a"))
    vb = lw.tile_value(b, loc_of("b"))
    vacc = lw.tile_value(acc, loc_of("acc"))
    return lw.mma(va, vb, vacc, loc_of("a"))


def api_transpose(lw: TileRules, loc_of: LocOf, x: Any, axis0: Any, axis1: Any) -> Value:
    v = lw.tile_value(x, loc_of("x"))
    nd = tile_type(v).ndim

    def unset(a: Any) -> bool:
        return isinstance(a, PyObj) and a.obj is None

    if unset(axis0) and unset(axis1):
        return lw.permute(v, None, loc_of("x"))
    if isinstance(axis0, tuple) and unset(axis1):  # NumPy's `axes`: every axis, in order
        perm = tuple(lw.static_int(a, loc_of("axis0"), "an axis") for a in axis0)
        return lw.permute(v, perm, loc_of("axis0"))
    if unset(axis0) or unset(axis1):
        raise CompileError(
            "`tile.transpose` swaps two axes: give both, `tile.transpose(x, axis0, axis1)`",
            loc_of("x"),
            code="E0061",
            help="or no axes to reverse them all (a 2-d tile's transpose), or a tuple of every "
            "axis to permute",
        )
    a = _axis(lw, axis0, nd, loc_of("axis0")) % nd
    b = _axis(lw, axis1, nd, loc_of("axis1")) % nd
    order = list(range(nd))
    order[a], order[b] = b, a
    return lw.permute(v, tuple(order), loc_of("x"))


def api_item(lw: TileRules, loc_of: LocOf, x: Any) -> Value:
    v = lw.tile_value(x, loc_of("x"))
    shape = tile_type(v).shape
    if math.prod(shape) != 1:
        raise KernelTypeError(
            f"`item()` takes a tile of one element, not one of shape {shape}",
            loc_of("x"),
            help="load a tile of shape (1, ...), or reduce with `tile.sum`/`tile.max`",
        )
    return v if shape == () else lw.emit(ops.Reshape(v, (), loc_of("x")))


def api_reshape(lw: TileRules, loc_of: LocOf, x: Any, shape: Any) -> Value:
    v = lw.tile_value(x, loc_of("x"))
    shp = lw.static_shape(shape, loc_of("shape"))
    vshape = tile_type(v).shape
    if math.prod(shp) != math.prod(vshape):
        raise KernelTypeError(
            f"cannot reshape a tile of shape {vshape} to {shp}",
            loc_of("shape"),
            label=f"{math.prod(shp)} elements, the tile has {math.prod(vshape)}",
            help="a reshape keeps the number of elements; to repeat a tile use "
            "`tile.broadcast_to`, to take part of one load a smaller tile",
        )
    return v if shp == vshape else lw.emit(ops.Reshape(v, shp, loc_of("x")))


def api_permute(lw: TileRules, loc_of: LocOf, x: Any, axes: Any) -> Value:
    v = lw.tile_value(x, loc_of("x"))
    items = axes if isinstance(axes, tuple) else (axes,)
    perm = tuple(lw.static_int(a, loc_of("axes"), "an axis") for a in items)
    return lw.permute(v, perm, loc_of("axes"))


def api_expand_dims(lw: TileRules, loc_of: LocOf, x: Any, axis: Any) -> Value:
    v = lw.tile_value(x, loc_of("x"))
    shape = tile_type(v).shape
    a = lw.static_int(axis, loc_of("axis"), "an axis")
    if not -len(shape) - 1 <= a <= len(shape):
        raise CompileError(
            f"axis {a} is out of range for a tile of {len(shape)} dimension(s) plus the new one",
            loc_of("axis"),
            help=f"the new axis goes at 0..{len(shape)} (or -{len(shape) + 1}..-1)",
        )
    a = a % (len(shape) + 1)
    return lw.emit(ops.Reshape(v, (*shape[:a], 1, *shape[a:]), loc_of("x")))


def api_broadcast_to(lw: TileRules, loc_of: LocOf, x: Any, shape: Any) -> Value:
    v = lw.tile_value(x, loc_of("x"))
    return lw.broadcast_to(v, lw.static_shape(shape, loc_of("shape")), loc_of("x"))


def api_astype(lw: TileRules, loc_of: LocOf, x: Any, dtype: Any) -> Value:
    return lw.cast(x, lw.static_dtype(dtype, loc_of("dtype")), loc_of("dtype"))


HANDLERS: dict[str, Callable[..., Operand]] = (
    {
        name[len("api_") :]: handler
        for name, handler in list(globals().items())
        if name.startswith("api_") and callable(handler)
    }
    | SHAPING
    | SPECIAL
)
