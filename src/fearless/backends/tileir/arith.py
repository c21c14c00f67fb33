"""Tile IR arithmetic that takes more than one op: reductions and scans (a nested block that
combines two scalars), and Python's `//` and `%` on float tiles, each with the simulator's
meaning.

sim/numerics.py defines float `//` and `%` as CPython's float divmod step by step (fmod, then the
fix-ups NumPy's npy_divmod makes): the remainder takes the divisor's sign, the quotient is
the floor of the exact quotient snapped to the nearest integer, `x // 0.0 == x / 0.0` and
`x % 0.0` is NaN. This module writes the same steps as Tile IR ops (`remf` is C's fmod), f16
and bf16 through f32 with one rounding at the end, as the simulator computes them.
"""

from __future__ import annotations

from typing import Any, Protocol

from ... import dtypes
from ...dtypes import DType
from ...ir.tile import ops
from ...ir.tile.types import TileType, tile_type
from .registry import lowers

# Tile IR's element type of each dtype (signedness lives in the ops)
SIMPLE = {
    "bool": "I1", "i8": "I8", "u8": "I8", "i16": "I16", "u16": "I16", "i32": "I32",
    "u32": "I32", "i64": "I64", "u64": "I64", "f16": "F16", "bf16": "BF16", "f32": "F32",
    "f64": "F64", "f8e4m3fn": "F8E4M3FN", "f8e5m2": "F8E5M2", "tf32": "TF32",
}  # fmt: skip


class _Lowering(Protocol):
    bc: Any
    b: Any
    tt: Any

    def elem(self, dt: DType) -> Any: ...

    def tid(self, t: TileType) -> Any: ...

    def _bytes(self, value: Any, dt: DType) -> bytes: ...


def reduce_tile(lw: _Lowering, op: ops.Reduce, x: Any) -> Any:
    """`tile.reduce`: sum, prod, max or min over one axis, from the kind's identity; a sum or
    product of f16 or bf16 in f32, rounded once (the simulator's meaning, as `scan_tile`'s:
    a 16-bit accumulator would round every partial sum)."""
    bc = lw.bc
    kind, t = op.attrs["kind"], tile_type(op.result)
    if kind in ("sum", "prod") and t.dtype.name in ("f16", "bf16"):
        near = bc.RoundingMode.NEAREST_EVEN
        wide_in = TileType(dtypes.f32, tile_type(op.operands[0]).shape)
        x = bc.encode_FToFOp(lw.b, lw.tid(wide_in), x, near)
        wide = _reduce(lw, kind, TileType(dtypes.f32, t.shape), op.attrs["axis"], x)
        return bc.encode_FToFOp(lw.b, lw.tid(t), wide, near)
    return _reduce(lw, kind, t, op.attrs["axis"], x)


def _reduce(lw: _Lowering, kind: str, t: TileType, axis: int, x: Any) -> Any:
    """The reduce op of `kind` over `axis` of `x` into result type `t`."""
    bc, tt = lw.bc, lw.tt
    dt = t.dtype
    if dt.is_float:
        ident_value = {"sum": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}[kind]
        ident = bc.Float(ident_value, getattr(bc.SimpleType, SIMPLE[dt.name]), tt)
    else:
        lo, hi = (
            (-(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1)
            if dt.is_signed
            else (0, (1 << dt.bits) - 1)
        )
        ident = bc.Integer(lw.elem(dt), dt.bits, {"sum": 0, "prod": 1, "max": lo, "min": hi}[kind])
    scalar = tt.tile(lw.elem(dt), [])
    nested = bc.encode_ReduceOp(lw.b, [lw.tid(t)], [x], axis, [ident])
    with nested.new_block([scalar, scalar]) as (acc, v):
        bc.encode_YieldOp(lw.b, [_combine(lw, kind, dt, scalar, acc, v)])
    return nested.done()[0]


def scan_tile(lw: _Lowering, op: ops.Scan, x: Any) -> Any:
    """`tile.scan`: inclusive prefix sums or products, in f32 for f16 and bf16 (the
    simulator's meaning: each prefix rounded once)."""
    bc, tt = lw.bc, lw.tt
    kind, t = op.attrs["kind"], tile_type(op.result)
    wide = TileType(dtypes.f32, t.shape) if t.dtype.name in ("f16", "bf16") else t
    if wide is not t:
        x = bc.encode_FToFOp(lw.b, lw.tid(wide), x, bc.RoundingMode.NEAREST_EVEN)
    dt, one = wide.dtype, kind == "prod"
    if dt.is_float:
        ident = bc.Float(1.0 if one else 0.0, getattr(bc.SimpleType, SIMPLE[dt.name]), tt)
    else:
        ident = bc.Integer(lw.elem(dt), dt.bits, 1 if one else 0)
    scalar = tt.tile(lw.elem(dt), [])
    nested = bc.encode_ScanOp(
        lw.b, [lw.tid(wide)], [x], op.attrs["axis"], bool(op.attrs["reverse"]), [ident]
    )
    with nested.new_block([scalar, scalar]) as (acc, v):
        bc.encode_YieldOp(lw.b, [_combine(lw, kind, dt, scalar, acc, v)])
    r = nested.done()[0]
    if wide is not t:
        r = bc.encode_FToFOp(lw.b, lw.tid(t), r, bc.RoundingMode.NEAREST_EVEN)
    return r


def _combine(lw: _Lowering, kind: str, dt: DType, rt: Any, a: Any, x: Any) -> Any:
    bc, b = lw.bc, lw.b
    if dt.is_float:
        if kind in ("sum", "prod"):
            f = bc.encode_AddFOp if kind == "sum" else bc.encode_MulFOp
            return f(b, rt, a, x, bc.RoundingMode.NEAREST_EVEN, False)
        f = bc.encode_MaxFOp if kind == "max" else bc.encode_MinFOp
        return f(b, rt, a, x, True, False)
    if kind in ("sum", "prod"):
        f = bc.encode_AddIOp if kind == "sum" else bc.encode_MulIOp
        return f(b, rt, a, x, bc.IntegerOverflow.NONE)
    sign = bc.Signedness.Signed if dt.is_signed else bc.Signedness.Unsigned
    f = bc.encode_MaxIOp if kind == "max" else bc.encode_MinIOp
    return f(b, rt, a, x, sign)


def float_divmod(lw: _Lowering, kind: str, t: TileType, x: Any, y: Any) -> Any:
    """`x // y` (kind "floordiv") or `x % y` ("mod") of float tiles of type `t`."""
    bc, b = lw.bc, lw.b
    narrow = t.dtype.bits < 32
    ct = TileType(dtypes.f32, t.shape) if narrow else t
    if narrow:
        x, y = (bc.encode_FToFOp(b, lw.tid(ct), v, bc.RoundingMode.NEAREST_EVEN) for v in (x, y))
    quotient, remainder = _divmod(lw, ct, x, y)
    r = quotient if kind == "floordiv" else remainder
    if narrow:
        r = bc.encode_FToFOp(b, lw.tid(t), r, bc.RoundingMode.NEAREST_EVEN)
    return r


def _divmod(lw: _Lowering, t: TileType, a: Any, w: Any) -> tuple[Any, Any]:
    bc, b = lw.bc, lw.b
    rt, bt = lw.tid(t), lw.tid(TileType(dtypes.bool_, t.shape))
    ne = bc.RoundingMode.NEAREST_EVEN  # IEEE division, as the simulator's
    P, order = bc.ComparisonPredicate, bc.ComparisonOrdering

    def const(v: float) -> Any:
        return bc.encode_ConstantOp(b, rt, lw._bytes(v, t.dtype))

    def cmp(p: Any, u: Any, v: Any, unordered: bool = False) -> Any:
        return bc.encode_CmpFOp(b, bt, u, v, p, order.UNORDERED if unordered else order.ORDERED)

    def select(c: Any, u: Any, v: Any) -> Any:
        return bc.encode_SelectOp(b, rt, c, u, v)

    zero, one = const(0.0), const(1.0)
    mod = bc.encode_RemFOp(b, rt, a, w)
    div = bc.encode_DivFOp(b, rt, bc.encode_SubFOp(b, rt, a, mod, ne, False), w, ne, False)
    mod_nonzero = cmp(P.NOT_EQUAL, mod, zero, unordered=True)  # NaN counts, as in C
    signs_differ = bc.encode_XOrIOp(b, bt, cmp(P.LESS_THAN, w, zero), cmp(P.LESS_THAN, mod, zero))
    fix = bc.encode_AndIOp(b, bt, mod_nonzero, signs_differ)
    mod_fixed = select(fix, bc.encode_AddFOp(b, rt, mod, w, ne, False), mod)
    div = select(fix, bc.encode_SubFOp(b, rt, div, one, ne, False), div)
    mod_fixed = select(mod_nonzero, mod_fixed, _signed_zero(lw, t, w))
    floor = bc.encode_FloorOp(b, rt, div)
    up = cmp(P.GREATER_THAN, bc.encode_SubFOp(b, rt, div, floor, ne, False), const(0.5))
    snapped = select(up, bc.encode_AddFOp(b, rt, floor, one, ne, False), floor)
    quotient = bc.encode_DivFOp(b, rt, a, w, ne, False)
    div_nonzero = cmp(P.NOT_EQUAL, div, zero, unordered=True)
    floordiv = select(div_nonzero, snapped, _signed_zero(lw, t, quotient))
    w_zero = cmp(P.EQUAL, w, zero)
    return select(w_zero, quotient, floordiv), select(w_zero, mod, mod_fixed)


def _signed_zero(lw: _Lowering, t: TileType, v: Any) -> Any:
    """copysign(0.0, v): -0.0 where v's sign bit is set (NaN and -0.0 included)."""
    bc, b = lw.bc, lw.b
    it = TileType(dtypes.i64 if t.dtype.bits == 64 else dtypes.i32, t.shape)
    bits = bc.encode_BitcastOp(b, lw.tid(it), v)
    zero_bits = bc.encode_ConstantOp(b, lw.tid(it), lw._bytes(0, it.dtype))
    negative = bc.encode_CmpIOp(
        b,
        lw.tid(TileType(dtypes.bool_, t.shape)),
        bits,
        zero_bits,
        bc.ComparisonPredicate.LESS_THAN,
        bc.Signedness.Signed,
    )
    rt = lw.tid(t)
    return bc.encode_SelectOp(
        b,
        rt,
        negative,
        bc.encode_ConstantOp(b, rt, lw._bytes(-0.0, t.dtype)),
        bc.encode_ConstantOp(b, rt, lw._bytes(0.0, t.dtype)),
    )


@lowers(ops.Mma)
def mma(lw: Any, op: ops.Mma, args: list[Any]) -> Any:
    """`acc + a @ b` on the tensor cores: MmaF for floats, MmaI (each side's signedness) for
    8-bit integers into i32."""
    bc, rt = lw.bc, lw.tid(tile_type(op.result))
    a, b = (tile_type(v).dtype for v in op.operands[:2])
    if a.is_float:
        return bc.encode_MmaFOp(lw.b, rt, *args, False)
    sign = [bc.Signedness.Signed if d.is_signed else bc.Signedness.Unsigned for d in (a, b)]
    return bc.encode_MmaIOp(lw.b, rt, *args, *sign)


@lowers(ops.Extract)
def extract(lw: Any, op: ops.Extract, args: list[Any]) -> Any:
    """Tile IR's `extract`: the sub-tile at index (i32 constants, in units of its shape)."""
    i32 = lw.tid(TileType(dtypes.i32))
    index = [
        lw.bc.encode_ConstantOp(lw.b, i32, lw._bytes(i, dtypes.i32)) for i in op.attrs["index"]
    ]
    return lw.bc.encode_ExtractOp(lw.b, lw.tid(tile_type(op.result)), args[0], index)


@lowers(ops.Bitcast)
def bitcast(lw: Any, op: ops.Bitcast, args: list[Any]) -> Any:
    return lw.bc.encode_BitcastOp(lw.b, lw.tid(tile_type(op.result)), args[0])


@lowers(ops.Cat)
def cat(lw: Any, op: ops.Cat, args: list[Any]) -> Any:
    return lw.bc.encode_CatOp(
        lw.b, lw.tid(tile_type(op.result)), args[0], args[1], op.attrs["axis"]
    )
