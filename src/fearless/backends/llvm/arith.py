"""Scalar arithmetic of the SIMT IR in LLVM: binary, unary, compare, cast and math ops.

Each method emits straight-line code at the builder's position (no new blocks), so the visitor
in `lower.py` owns the control flow. The semantics are those of `ir/simt/ops.py`, which the
NumPy simulator implements; where LLVM leaves a case undefined the choices below define it:

  * integers wrap (no `nsw`/`nuw` on user arithmetic);
  * `floordiv`/`mod` follow Python and NumPy: for ints the quotient rounds toward -inf and the
    remainder takes the divisor's sign; `x // 0 == x % 0 == 0` and `MIN // -1 == MIN`,
    `MIN % -1 == 0` (NumPy's results; LLVM's sdiv/srem would be undefined there). For floats,
    NumPy's `npy_divmod` (= CPython's float divmod) is transcribed step by step, with the exact
    `fmod` from libdevice; `b == 0` gives `a / b` and NaN as NumPy does;
  * shifts by the type's width or more give 0 (`shr` of a negative signed value gives -1), as
    NumPy's `npy_lshift`/`npy_rshift` do, instead of LLVM poison;
  * float `min`/`max` are `np.minimum`/`np.maximum` bit for bit: NaN in either operand wins
    (the first if both), and of two equal values (+0.0 and -0.0) the second is returned;
    `math.fmin`/`fmax` are `np.fmin`/`np.fmax`: a NaN loses to a number; of +0.0 and -0.0 the
    second is returned (NumPy's float32 loop does so, its float64 loop returns the first);
  * float -> int truncates toward zero and saturates to the target's range, NaN -> 0 (Rust's
    `as`, PTX's `cvt.rzi.sat`). C and NumPy leave out-of-range conversions undefined (NumPy's
    results differ between its SIMD and scalar loops), so only in-range values match NumPy;
  * f16/bf16 `floordiv`, `mod`, `pow` and libdevice functions compute in f32 and round once,
    as NumPy's float16 loops do; int -> bf16/f16 converts through f32 likewise;
  * no fast-math flags anywhere: no FMA contraction, IEEE `div.rn`, `sqrt.rn`, no FTZ.
"""

from __future__ import annotations

from llvmlite import ir

from ... import dtypes
from ...dtypes import DType
from ...errors import InternalError
from ...ir.simt.ops import MATH_FNS
from .support import ModuleSupport
from .types import I1, scalar_type

F32 = ir.FloatType()

# Math functions that are exact and have an LLVM intrinsic (NVPTX lowers them to one
# correctly rounded instruction: sqrt.rn, cvt.rmi, abs, ...). `round` is Python's and NumPy's
# round-half-to-even, not C's `round` (half away from zero) that libdevice implements.
INTRINSIC_MATH = {
    "sqrt": "llvm.sqrt",
    "floor": "llvm.floor",
    "ceil": "llvm.ceil",
    "trunc": "llvm.trunc",
    "round": "llvm.roundeven",
    "fabs": "llvm.fabs",
    "copysign": "llvm.copysign",
    "fma": "llvm.fma",
}

# fmin/fmax (np.fmin/np.fmax: a NaN loses to a number) are emitted inline; every other math
# function of the IR (ir/simt/ops.MATH_FNS) has a libdevice implementation (`__nv_<name>f` for f32,
# `__nv_<name>` for f64).
INLINE_MATH = frozenset(("fmin", "fmax"))
LIBDEVICE_MATH = frozenset(MATH_FNS) - set(INTRINSIC_MATH) - INLINE_MATH

# Binary kinds that are one IRBuilder instruction (wrapping integer and IEEE float arithmetic).
_INT_BUILDER = {"add": "add", "sub": "sub", "mul": "mul", "and": "and_", "or": "or_", "xor": "xor"}
_FLOAT_BUILDER = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}

_SIGNED_PRED = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _is_half(dtype: DType) -> bool:
    return dtype.is_float and dtype.bits == 16


class ScalarEmitter:
    """Emits scalar ops with `builder`; declarations go through `support`."""

    def __init__(self, builder: ir.IRBuilder, support: ModuleSupport) -> None:
        self.b = builder
        self.support = support

    # ---------------------------------------------------------------------------- binary

    def binary(self, kind: str, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
        if dtype.is_float:
            return self._float_binary(kind, dtype, x, y)
        if dtype.is_bool and kind not in ("and", "or", "xor", "min", "max"):
            raise InternalError(f"binary {kind} on bool reached the backend")
        return self._int_binary(kind, dtype, x, y)

    def _int_binary(self, kind: str, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
        b = self.b
        if kind in _INT_BUILDER:
            return getattr(b, _INT_BUILDER[kind])(x, y)  # type: ignore[no-any-return]
        if kind in ("min", "max"):
            sign = "s" if dtype.is_signed else "u"
            return self._intrinsic(f"llvm.{sign}{kind}", x, y)
        if kind in ("shl", "shr"):
            return self._shift(kind, dtype, x, y)
        if kind in ("floordiv", "mod"):
            return self._int_floordiv_mod(kind, dtype, x, y)
        if kind == "pow":
            return b.call(self.support.ipow(dtype), [x, y])
        raise InternalError(f"binary {kind} on {dtype} reached the backend")

    def _shift(self, kind: str, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
        b, ty = self.b, x.type
        width = ir.Constant(ty, dtype.bits)
        if kind == "shr" and dtype.is_signed:
            # An arithmetic shift by >= width is a shift by width-1: all sign bits.
            amount = self._intrinsic("llvm.umin", y, ir.Constant(ty, dtype.bits - 1))
            return b.ashr(x, amount)
        in_range = b.icmp_unsigned("<", y, width)
        shifted = b.shl(x, y) if kind == "shl" else b.lshr(x, y)
        return b.select(in_range, shifted, ir.Constant(ty, 0))

    def _int_floordiv_mod(self, kind: str, dtype: DType, n: ir.Value, d: ir.Value) -> ir.Value:
        b, ty = self.b, n.type
        zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
        d_is_zero = b.icmp_unsigned("==", d, zero)
        if not dtype.is_signed:
            # Divide by 1 instead of 0 (udiv by 0 is undefined), then give NumPy's 0.
            safe = b.select(d_is_zero, one, d)
            r = b.udiv(n, safe) if kind == "floordiv" else b.urem(n, safe)
            return b.select(d_is_zero, zero, r) if kind == "floordiv" else r
        # Divide by 1 where sdiv/srem are undefined: d == 0, and MIN / -1 (whose floor quotient
        # wraps to MIN = MIN / 1, remainder 0 = MIN % 1).
        int_min = ir.Constant(ty, -(1 << (dtype.bits - 1)))
        overflow = b.and_(
            b.icmp_signed("==", n, int_min), b.icmp_signed("==", d, ir.Constant(ty, -1))
        )
        safe = b.select(b.or_(d_is_zero, overflow), one, d)
        q = b.sdiv(n, safe)
        r = b.srem(n, safe)
        # C truncates toward zero; Python floors: step down when the remainder is non-zero
        # and its sign differs from the divisor's.
        adjust = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, safe), zero))
        if kind == "mod":
            return b.select(adjust, b.add(r, safe), r)  # r is 0 when d == 0
        q = b.select(adjust, b.sub(q, one), q)
        return b.select(d_is_zero, zero, q)

    def _float_binary(self, kind: str, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
        b = self.b
        if kind in _FLOAT_BUILDER:
            return getattr(b, _FLOAT_BUILDER[kind])(x, y)  # type: ignore[no-any-return]
        if kind in ("min", "max"):
            return self._numpy_min_max(kind, x, y, nan_wins=True)
        if kind in ("floordiv", "mod", "pow"):
            if _is_half(dtype):
                r = self._float_binary(kind, dtypes.f32, self._fpext(x), self._fpext(y))
                return b.fptrunc(r, x.type)
            if kind == "pow":
                return self._libdevice("pow", dtype, [x, y])
            quotient, remainder = self._py_divmod(dtype, x, y)
            return quotient if kind == "floordiv" else remainder
        raise InternalError(f"binary {kind} on {dtype} reached the backend")

    def _py_divmod(self, dtype: DType, a: ir.Value, w: ir.Value) -> tuple[ir.Value, ir.Value]:
        """NumPy's `npy_divmod` (CPython's float divmod), step by step; f32 or f64."""
        b, ty = self.b, a.type
        zero, one, half = ir.Constant(ty, 0.0), ir.Constant(ty, 1.0), ir.Constant(ty, 0.5)
        mod = self._libdevice("fmod", dtype, [a, w])  # exact
        div = b.fdiv(b.fsub(a, mod), w)
        # if (mod) { if ((w < 0) != (mod < 0)) { mod += w; div -= 1; } } else mod = copysign(0, w)
        mod_nonzero = b.fcmp_unordered("!=", mod, zero)  # NaN counts as true, as in C
        signs_differ = b.xor(b.fcmp_ordered("<", w, zero), b.fcmp_ordered("<", mod, zero))
        fix = b.and_(mod_nonzero, signs_differ)
        mod_fixed = b.select(fix, b.fadd(mod, w), mod)
        div = b.select(fix, b.fsub(div, one), div)
        mod_fixed = b.select(mod_nonzero, mod_fixed, self._intrinsic("llvm.copysign", zero, w))
        # if (div) { fl = floor(div); if (div - fl > 0.5) fl += 1; } else fl = copysign(0, a/w)
        floor = self._intrinsic("llvm.floor", div)
        snapped = b.select(b.fcmp_ordered(">", b.fsub(div, floor), half), b.fadd(floor, one), floor)
        quotient = b.fdiv(a, w)
        signed_zero = self._intrinsic("llvm.copysign", zero, quotient)
        floordiv = b.select(b.fcmp_unordered("!=", div, zero), snapped, signed_zero)
        # w == 0: floordiv is a / w (inf or NaN), the remainder fmod's NaN.
        w_is_zero = b.fcmp_ordered("==", w, zero)
        return b.select(w_is_zero, quotient, floordiv), b.select(w_is_zero, mod, mod_fixed)

    def _numpy_min_max(self, kind: str, x: ir.Value, y: ir.Value, *, nan_wins: bool) -> ir.Value:
        """NumPy's float min/max loops: `x < y ? x : y` (or `>`), plus NaN handling.

        np.minimum: `isnan(x) || x < y ? x : y` (a NaN in y falls through to y);
        np.fmin:    `isnan(y) || x < y ? x : y` (a NaN in x falls through to y).
        LLVM's minimum/minnum order -0.0 below +0.0 instead of returning the second operand.
        """
        b = self.b
        op = "<" if kind in ("min", "fmin") else ">"
        nan_side = x if nan_wins else y
        pick_x = b.or_(b.fcmp_ordered(op, x, y), b.fcmp_unordered("uno", nan_side, nan_side))
        return b.select(pick_x, x, y)

    # ----------------------------------------------------------------------------- unary

    def unary(self, kind: str, dtype: DType, x: ir.Value) -> ir.Value:
        b = self.b
        if kind == "neg" and dtype.is_float:
            return b.fneg(x)
        if kind == "neg" and dtype.is_int:
            return b.sub(ir.Constant(x.type, 0), x)
        if kind == "not" and dtype.is_bool:
            return b.xor(x, ir.Constant(I1, 1))
        if kind == "invert" and not dtype.is_float:
            return b.not_(x)
        if kind == "abs" and dtype.is_float:
            return self._intrinsic("llvm.fabs", x)
        if kind == "abs" and dtype.is_signed:
            # abs(MIN) wraps to MIN, as NumPy's; `false`: MIN is not poison.
            fn = self.support.intrinsic(f"llvm.abs.i{dtype.bits}", x.type, [x.type, I1])
            return b.call(fn, [x, ir.Constant(I1, 0)])
        if kind == "abs":
            return x  # unsigned and bool
        raise InternalError(f"unary {kind} on {dtype} reached the backend")

    # --------------------------------------------------------------------------- compare

    def compare(self, pred: str, dtype: DType, x: ir.Value, y: ir.Value) -> ir.Value:
        op = _SIGNED_PRED[pred]
        if dtype.is_float:
            # Python's comparisons: false when either side is NaN, except `!=`, which is true.
            if pred == "ne":
                return self.b.fcmp_unordered(op, x, y)
            return self.b.fcmp_ordered(op, x, y)
        if dtype.is_signed:
            return self.b.icmp_signed(op, x, y)
        return self.b.icmp_unsigned(op, x, y)  # unsigned ints; bool orders False < True

    # ------------------------------------------------------------------------------ cast

    def cast(self, x: ir.Value, src: DType, dst: DType) -> ir.Value:
        b = self.b
        to = scalar_type(dst)
        if src == dst:
            return x
        if dst.is_bool:  # x != 0; NaN is true, as bool(nan) in Python
            if src.is_float:
                return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
            return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
        if src.is_bool:
            return b.zext(x, to) if dst.is_int else b.uitofp(x, to)
        if src.is_int and dst.is_int:
            if dst.bits < src.bits:
                return b.trunc(x, to)
            if dst.bits == src.bits:
                return x
            return b.sext(x, to) if src.is_signed else b.zext(x, to)
        if src.is_int:  # -> float
            convert = b.sitofp if src.is_signed else b.uitofp
            if _is_half(dst):
                return b.fptrunc(convert(x, F32), to)
            return convert(x, to)
        if dst.is_int:  # float -> int
            return self._float_to_int(x, src, dst)
        # float -> float; f16 <-> bf16 goes through f32 (exact widening, one rounding).
        if _is_half(src) and _is_half(dst):
            return b.fptrunc(self._fpext(x), to)
        return b.fpext(x, to) if dst.bits > src.bits else b.fptrunc(x, to)

    def _float_to_int(self, x: ir.Value, src: DType, dst: DType) -> ir.Value:
        if _is_half(src):
            x = self._fpext(x)  # exact; the f32 conversion instructions exist on every arch
        name = "llvm.fptosi.sat" if dst.is_signed else "llvm.fptoui.sat"
        return self._intrinsic_to(name, scalar_type(dst), x)

    # ------------------------------------------------------------------------------ math

    def math(self, fn: str, dtype: DType, args: list[ir.Value]) -> ir.Value:
        if not dtype.is_float:
            raise InternalError(f"math.{fn} on {dtype} reached the backend")
        if fn in INTRINSIC_MATH:
            return self._intrinsic(INTRINSIC_MATH[fn], *args)
        if fn in ("fmin", "fmax"):
            return self._numpy_min_max(fn, args[0], args[1], nan_wins=False)
        if fn not in LIBDEVICE_MATH:
            raise InternalError(f"no lowering for math.{fn}")
        if _is_half(dtype):
            wide = self._libdevice(fn, dtypes.f32, [self._fpext(a) for a in args])
            return self.b.fptrunc(wide, args[0].type)
        return self._libdevice(fn, dtype, args)

    # --------------------------------------------------------------------------- helpers

    def _libdevice(self, fn: str, dtype: DType, args: list[ir.Value]) -> ir.Value:
        suffix = {32: "f", 64: ""}[dtype.bits]
        ty = scalar_type(dtype)
        decl = self.support.libdevice(f"__nv_{fn}{suffix}", ty, [ty] * len(args))
        return self.b.call(decl, args)

    def _intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        """An overloaded intrinsic whose result and operands all have the first arg's type."""
        ty = args[0].type
        decl = self.support.intrinsic(f"{name}.{_suffix(ty)}", ty, [ty] * len(args))
        return self.b.call(decl, list(args))

    def _intrinsic_to(self, name: str, ret: ir.Type, x: ir.Value) -> ir.Value:
        """A conversion intrinsic overloaded on result and operand type (`fptosi.sat`)."""
        decl = self.support.intrinsic(f"{name}.{_suffix(ret)}.{_suffix(x.type)}", ret, [x.type])
        return self.b.call(decl, [x])

    def _fpext(self, x: ir.Value) -> ir.Value:
        return self.b.fpext(x, F32)


def _suffix(ty: ir.Type) -> str:
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    return str(ty.intrinsic_name)
