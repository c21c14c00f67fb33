"""The arithmetic of SIMT IR ops in NumPy, over lanes: the executable definition of each op.

Every function built here takes NumPy arrays (one element per lane) or NumPy scalars (a value
all lanes share) in the operands' *storage* dtype and returns the same, so one definition
serves both. The `*_fn` factories pick the definition for an op's type once, when the
simulator plans a kernel; nothing is decided per call.

Storage: each type lives in its NumPy dtype, except bf16, which NumPy lacks: a bf16 value is
held as the float32 of the same value (exact), and every bf16 result is rounded to bf16 with
round-to-nearest-even. bf16 arrays in memory are 16-bit words (`bf16_load`/`bf16_store`).

Where Python, C or LLVM leave a case open, these are the definitions (the LLVM backend,
`backends/llvm/arith.py`, makes the same choices; a disagreement is a bug in one of the two):

  integers     wrap (two's complement at the type's width), including `-MIN`, `abs(MIN)`,
               `MIN // -1 == MIN` and `MIN % -1 == 0`.
  // and %     Python's: the quotient rounds toward -inf, the remainder has the divisor's sign.
               Integer `x // 0 == 0` and `x % 0 == 0` (NumPy's results). Floats follow
               CPython's float divmod step by step (fmod, then fix-ups), as NumPy does;
               `x // 0.0 == x / 0.0` (inf or NaN) and `x % 0.0` is NaN.
  **           on integers: wrapping square-and-multiply; a negative exponent gives the real
               result truncated toward zero: 1 for base 1, +-1 for base -1, else 0.
  << and >>    the amount is read as unsigned; amounts >= the width give 0 for `shl` and
               unsigned `shr`, and the sign (0 or -1) for signed `shr`: Python's infinite-
               precision shift, wrapped. `shr` is arithmetic on signed types.
  min / max    on floats, NumPy's loops written out: min(x, y) = x if isnan(x) or x < y
               else y (max with >): a NaN wins, the first if both; of +0.0 and -0.0 the
               second is returned (the Tile track's `zero_ordered`: -0.0 < +0.0, as Tile IR's
               maxf/minf). `math.fmin/fmax` = x if isnan(y) or x < y else y (>): a NaN
               loses to a number.
  cast         int -> int wraps or extends by the source's signedness; x -> bool is x != 0
               (NaN is true); float -> int truncates toward zero and saturates to the target's
               range, NaN -> 0 (LLVM's fptosi.sat/fptoui.sat, PTX's cvt.rzi.sat, Rust's `as`);
               int -> f16/bf16 rounds through f32; f64 -> bf16 rounds once.
  f16, bf16    +, -, *, / are correctly rounded in the type (computing in f32 and rounding
               once gives the same bits); `//`, `%`, `**` and math functions compute in f32
               and round the result once.
  math         NumPy's functions in the operand's dtype (f32 stays f32). libdevice may differ
               by an ulp or two for exp/log/sin/...; sqrt, floor, ceil, trunc, fabs, copysign,
               fmin, fmax, fmod and fma are exact on both. `round` rounds half to even
               (Python's `round`, llvm.roundeven), not C's half-away-from-zero.
  fma          exactly rounded: f16/f32/bf16 through f64 with round-to-odd; f64 with an
               error-free transformation (Boldo & Melquiond 2008, Emulation of FMA and
               correctly rounded sums: proved algorithms using rounding to odd), exact
               rational arithmetic for the lanes outside its range.
Floats are IEEE with round-to-nearest-even, no FMA contraction, no flush of subnormals. NaN
bit patterns are not specified (compare NaNs as NaNs, not by bits).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from .. import dtypes
from ..dtypes import DType
from ..errors import InternalError
from .narrow import (  # noqa: F401  (bf16_load/store, raw_load/store, round_narrow: re-exported)
    bf16_load,
    bf16_store,
    raw_load,
    raw_store,
    round_bf16,
    round_narrow,
)

Fn = Callable[..., Any]

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
_U32 = np.uint32


def storage_dtype(dt: DType) -> np.dtype[Any]:
    """The NumPy dtype a value of `dt` is held in while the simulator runs."""
    return F32 if dt.is_raw else dt.np


def _unsupported(what: str, dt: DType) -> InternalError:
    return InternalError(f"the simulator has no `{what}` on {dt.name} (the IR should not have it)")


# ------------------------------------------------------------------------------------ bf16


def _f64_to_f32_odd(x: Any) -> Any:
    """float64 -> float32 rounded to odd: exact results stay, others take the odd neighbour.

    Rounding to odd first and to nearest second gives the correctly rounded result whenever
    the first format has at least two more bits than the second (f32 vs bf16: 24 vs 8).
    """
    x = np.asarray(x, F64)
    r = x.astype(F32)
    back = r.astype(F64)
    fix = (back != x) & ((r.view(_U32) & _U32(1)) == 0) & ~np.isnan(x)
    if np.any(fix):
        toward = np.where(x > back, F32.type(np.inf), F32.type(-np.inf))
        r = np.where(fix, np.nextafter(r, toward), r)
    return r


def _to_bf16(x: Any, src: DType) -> Any:
    if src.kind == "f" and src.bits == 64:
        return round_bf16(_f64_to_f32_odd(x))
    return round_bf16(np.asarray(x).astype(F32))


# ------------------------------------------------------------------------------- constants


def constant(value: Any, dt: DType) -> Any:
    """A literal or scalar argument as a value of `dt` (integers wrap to the width)."""
    if dt.is_bool:
        return np.bool_(bool(value))
    if dt.is_int:
        v = int(value) & ((1 << dt.bits) - 1)
        if dt.is_signed and v >= 1 << (dt.bits - 1):
            v -= 1 << dt.bits
        return dt.np.type(v)
    if dt.name == "bf16":
        return round_bf16(_f64_to_f32_odd(float(value)))[()]
    if dt.is_f8 or dt.name == "tf32":
        return round_narrow(float(value), dt)[()]
    return dt.np.type(float(value))


# ---------------------------------------------------------------------------------- binary


@functools.cache  # pure in its arguments; each op of each block asks again
def binary_fn(kind: str, dt: DType) -> Fn:
    """The function of `binary {kind}` on two operands of type `dt`."""
    if dt.is_bool:
        fn: Fn | None = {
            "and": np.logical_and,
            "or": np.logical_or,
            "xor": np.logical_xor,
            "min": np.logical_and,
            "max": np.logical_or,
        }.get(kind)
        if fn is None:
            raise _unsupported(kind, dt)
        return fn
    if dt.is_int:
        return _int_binary(kind, dt)
    fn = _FLOAT_BINARY.get(kind)
    if fn is None:
        raise _unsupported(kind, dt)
    if dt.name == "f16" and kind in ("floordiv", "mod", "pow"):
        return _via_f32(fn, dt.np)
    if dt.name == "bf16" and kind not in ("min", "max"):
        return _rounded_bf16(fn)
    return fn


def _via_f32(fn: Fn, out: np.dtype[Any]) -> Fn:
    def f(*xs: Any) -> Any:
        return np.asarray(fn(*(np.asarray(x).astype(F32) for x in xs))).astype(out)

    return f


def _rounded_bf16(fn: Fn) -> Fn:
    def f(*xs: Any) -> Any:
        return round_bf16(fn(*xs))

    return f


def _int_binary(kind: str, dt: DType) -> Fn:
    simple = {
        "add": np.add,
        "sub": np.subtract,
        "mul": np.multiply,
        "and": np.bitwise_and,
        "or": np.bitwise_or,
        "xor": np.bitwise_xor,
        "min": np.minimum,
        "max": np.maximum,
    }
    if kind in simple:
        return simple[kind]
    zero, one = dt.np.type(0), dt.np.type(1)
    if kind in ("floordiv", "mod"):
        npfn = np.floor_divide if kind == "floordiv" else np.remainder

        def divmod_(a: Any, b: Any) -> Any:
            by_zero = b == zero
            if not np.any(by_zero):
                return npfn(a, b)  # NumPy: Python's rounding, MIN // -1 wraps to MIN
            return np.where(by_zero, zero, npfn(a, np.where(by_zero, one, b)))

        return divmod_
    if kind == "pow":
        return _int_pow(dt)
    if kind in ("shl", "shr"):
        return _shift(kind, dt)
    raise _unsupported(kind, dt)


def _int_pow(dt: DType) -> Fn:
    zero, one = dt.np.type(0), dt.np.type(1)
    minus_one = dt.np.type(-1) if dt.is_signed else None

    def ipow(a: Any, b: Any) -> Any:
        negative = b < zero
        if minus_one is None or not np.any(negative):
            return np.power(a, b)  # square-and-multiply in the type: wraps
        r = np.power(a, np.where(negative, zero, b))
        odd = (b & one) != zero
        small = np.where(
            a == one, one, np.where(a == minus_one, np.where(odd, minus_one, one), zero)
        )
        return np.where(negative, small, r)

    return ipow


def _shift(kind: str, dt: DType) -> Fn:
    bits = dt.bits
    unsigned = np.dtype(f"uint{bits}")
    width = unsigned.type(bits)
    top = unsigned.type(bits - 1)
    zero = dt.np.type(0)
    npfn = np.left_shift if kind == "shl" else np.right_shift
    saturates_to_sign = kind == "shr" and dt.is_signed

    def shift(a: Any, b: Any) -> Any:
        amount = np.asarray(b).astype(unsigned)  # negative amounts read as huge
        r = npfn(a, np.minimum(amount, top).astype(dt.np))
        if saturates_to_sign:
            return r  # >> (width - 1) already gives the sign in every bit
        big = amount >= width
        return np.where(big, zero, r) if np.any(big) else r

    return shift


def _nan_wins_min(x: Any, y: Any) -> Any:
    return np.where(np.isnan(x) | (x < y), x, y)


def _nan_wins_max(x: Any, y: Any) -> Any:
    return np.where(np.isnan(x) | (x > y), x, y)


def zero_ordered(kind: str, dt: DType) -> Fn:
    """Tile IR's float `maxf` / `minf` (with NaN propagation) for `kind` "max" / "min": a NaN
    wins as in `binary_fn`, and of +0.0 and -0.0 -0.0 is the smaller, in either order (the
    H100, bench/experiments/tileir_open_numerics.py, 2026-12-07). Other kinds and dtypes:
    `binary_fn`'s."""
    if not dt.is_float or kind not in ("max", "min"):
        return binary_fn(kind, dt)
    pick = binary_fn(kind, dt)
    keep_first = (lambda x: ~np.signbit(x)) if kind == "max" else np.signbit

    def extreme(x: Any, y: Any) -> Any:
        r = pick(x, y)
        zeros = (x == 0) & (y == 0)
        return np.where(zeros, np.where(keep_first(x), x, y), r) if np.any(zeros) else r

    return extreme


def _nan_loses_min(x: Any, y: Any) -> Any:
    return np.where(np.isnan(y) | (x < y), x, y)


def _nan_loses_max(x: Any, y: Any) -> Any:
    return np.where(np.isnan(y) | (x > y), x, y)


def _py_divmod(a: Any, w: Any) -> tuple[Any, Any]:
    """CPython's float divmod (NumPy's npy_divmod) in the operands' dtype, step by step."""
    t = np.result_type(a, w).type
    zero, one, half = t(0), t(1), t(0.5)
    mod = np.fmod(a, w)
    div = (a - mod) / w
    mod_nonzero = mod != zero  # NaN counts as non-zero, as in C
    fix = mod_nonzero & ((w < zero) != (mod < zero))
    mod_fixed = np.where(fix, mod + w, mod)
    div = np.where(fix, div - one, div)
    mod_fixed = np.where(mod_nonzero, mod_fixed, np.copysign(zero, w))
    floor = np.floor(div)
    snapped = np.where(div - floor > half, floor + one, floor)
    quotient = a / w
    floordiv = np.where(div != zero, snapped, np.copysign(zero, quotient))
    w_zero = w == zero
    return np.where(w_zero, quotient, floordiv), np.where(w_zero, mod, mod_fixed)


def _float_floordiv(a: Any, b: Any) -> Any:
    return _py_divmod(a, b)[0]


def _float_mod(a: Any, b: Any) -> Any:
    return _py_divmod(a, b)[1]


_FLOAT_BINARY: dict[str, Fn] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "min": _nan_wins_min,
    "max": _nan_wins_max,
    "floordiv": _float_floordiv,
    "mod": _float_mod,
    "pow": np.power,
}


# ----------------------------------------------------------------------------------- unary


@functools.cache  # pure in its arguments; each op of each block asks again
def unary_fn(kind: str, dt: DType) -> Fn:
    if kind == "neg" and not dt.is_bool:
        return np.negative  # wraps on ints (unsigned too); flips the sign bit of floats
    if (kind == "not" and dt.is_bool) or (kind == "invert" and dt.is_bool):
        return np.logical_not
    if kind == "invert" and dt.is_int:
        return np.invert
    if kind == "abs":
        if dt.is_float or dt.is_signed:
            return np.absolute  # abs(MIN) wraps to MIN
        return _identity
    raise _unsupported(kind, dt)


def _identity(x: Any) -> Any:
    return x


# --------------------------------------------------------------------------------- compare


_COMPARE: dict[str, Fn] = {
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}


@functools.cache  # pure in its arguments; each op of each block asks again
def compare_fn(pred: str, dt: DType) -> Fn:
    """NumPy's comparisons are IEEE's on floats: false with a NaN, except `ne`."""
    return _COMPARE[pred]


def select(cond: Any, a: Any, b: Any) -> Any:
    if np.ndim(cond) == 0:
        return a if cond else b
    return np.where(cond, a, b)


# ------------------------------------------------------------------------------------ cast


@functools.cache  # pure in its arguments; each op of each block asks again
def cast_fn(src: DType, dst: DType) -> Fn:
    """The function of `cast` from `src` to `dst` (see the module docstring)."""
    out = storage_dtype(dst)
    if src == dst:
        return _identity
    if dst.is_bool:
        zero = storage_dtype(src).type(0)
        return lambda x: np.not_equal(x, zero)
    if dst.name == "bf16":
        return lambda x: _to_bf16(x, src)
    if dst.is_f8 or dst.name == "tf32":  # through f32 (the tensor cores' inputs come from f32)
        return lambda x: round_narrow(np.asarray(x).astype(F32), dst)
    if src.is_float and dst.is_int:
        return _float_to_int(src, dst)
    if src.is_int and dst.name == "f16":  # through f32, as the LLVM backend converts
        return lambda x: np.asarray(x).astype(F32).astype(out)
    return lambda x: np.asarray(x).astype(out)  # one rounding, or exact


def _float_to_int(src: DType, dst: DType) -> Fn:
    lo, hi = dtypes.int_range(dst)
    limit = float(hi) + 1.0  # 2**(bits-1) or 2**bits: exact in every float type (or inf)
    out = dst.np
    lo_t, hi_t = out.type(lo), out.type(hi)
    half = src.bits <= 16

    def convert(x: Any) -> Any:
        x = np.asarray(x)
        if half:
            x = x.astype(F32)
        t = np.trunc(x)
        big = t >= limit
        small = t < float(lo)
        bad = big | small | np.isnan(t)
        r = np.where(bad, 0, t).astype(out)
        if np.any(bad):  # saturate; NaN stays 0
            r = np.where(big, hi_t, np.where(small, lo_t, r))
        return r

    return convert


# ------------------------------------------------------------------------------------ math


def _erf(x: Any) -> Any:
    return np.asarray(_ERF(np.asarray(x, F64)), F64)


def _erfc(x: Any) -> Any:
    return np.asarray(_ERFC(np.asarray(x, F64)), F64)


_ERF = np.frompyfunc(math.erf, 1, 1)  # NumPy has no erf; math.erf per lane, in f64
_ERFC = np.frompyfunc(math.erfc, 1, 1)

_MATH: dict[str, Fn] = {
    "exp": np.exp,
    "exp2": np.exp2,
    "expm1": np.expm1,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "log1p": np.log1p,
    "sqrt": np.sqrt,
    "cbrt": np.cbrt,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "round": np.rint,
    "fabs": np.fabs,
    "pow": np.power,
    "atan2": np.arctan2,
    "fmod": np.fmod,
    "hypot": np.hypot,
    "copysign": np.copysign,
    "fmin": _nan_loses_min,
    "fmax": _nan_loses_max,
}


@functools.cache  # pure in its arguments; each op of each block asks again
def math_fn(name: str, dt: DType) -> Fn:
    """The function of `math {name}` on operands of the float type `dt`."""
    if not dt.is_float:
        raise _unsupported(f"math.{name}", dt)
    if name == "fma":
        return _fma_fn(dt)
    out = storage_dtype(dt)
    if name in ("erf", "erfc"):
        f64fn = _erf if name == "erf" else _erfc
        if dt.name == "bf16":
            return lambda x: round_bf16(_f64_to_f32_odd(f64fn(x)))
        if dt.name == "f16":
            return lambda x: f64fn(x).astype(F32).astype(out)
        return lambda x: f64fn(x).astype(out)
    if name == "rsqrt":
        one = out.type(1)

        def fn(x: Any) -> Any:
            return one / np.sqrt(x)
    else:
        fn = _MATH[name]
    if dt.name == "f16":
        return _via_f32(fn, out)
    if dt.name == "bf16":
        return _rounded_bf16(fn)
    return fn


# ------------------------------------------------------------------------------------- fma


def _two_sum(a: Any, b: Any) -> tuple[Any, Any]:
    """s = fl(a + b) and the exact error a + b - s (Knuth), in float64."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _add_odd(a: Any, b: Any) -> Any:
    """a + b in float64 rounded to odd (finite a, b whose sum does not overflow)."""
    s, err = _two_sum(a, b)
    fix = (err != 0) & ((s.view(np.uint64) & np.uint64(1)) == 0) & np.isfinite(s)
    if np.any(fix):
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s


def _fma_fn(dt: DType) -> Fn:
    out = storage_dtype(dt)
    if dt.bits == 64:
        return _fma_f64

    def fma(a: Any, b: Any, c: Any) -> Any:
        # The product of two <= 24-bit significands is exact in f64; the sum rounded to odd
        # in 53 bits, then to nearest in the narrow type, is the correctly rounded fma.
        a64, b64, c64 = (np.asarray(v, F64) for v in (a, b, c))
        s = _add_odd(a64 * b64, c64)
        if dt.name == "bf16":
            return round_bf16(_f64_to_f32_odd(s))
        return s.astype(out)

    return fma


_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's splitting constant for float64


def _two_prod(a: Any, b: Any) -> tuple[Any, Any]:
    """p = fl(a * b) and the exact error a * b - p (Dekker), without hardware fma."""
    p = a * b
    ca, cb = _SPLIT * a, _SPLIT * b
    ah, bh = ca - (ca - a), cb - (cb - b)
    al, bl = a - ah, b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _fma_f64(a: Any, b: Any, c: Any) -> Any:
    a, b, c = np.broadcast_arrays(*(np.asarray(v, F64) for v in (a, b, c)))
    scalar = a.ndim == 0
    a, b, c = (np.atleast_1d(v) for v in (a, b, c))
    uh, ul = _two_prod(a, b)
    th, tl = _two_sum(c, uh)
    result = th + _add_odd(tl, ul)
    # The error-free transformations hold away from overflow and underflow; elsewhere:
    naive = a * b + c  # right when a or b is 0, inf or NaN, or c is 0 (one rounding)
    finite_ab = np.isfinite(a) & np.isfinite(b)
    mag = np.abs(uh)
    fast = (
        finite_ab
        & np.isfinite(c)
        & (a != 0)
        & (b != 0)
        & (c != 0)
        & (mag > 2.0**-900)
        & (mag < 2.0**1000)
        & (np.abs(c) < 2.0**1000)
        & (np.abs(a) < 2.0**990)
        & (np.abs(b) < 2.0**990)
    )
    if not fast.all():
        result = np.where(fast, result, naive)
        result = np.where(finite_ab & ~np.isfinite(c), c, result)  # finite a*b + inf/NaN
        slow = finite_ab & np.isfinite(c) & (a != 0) & (b != 0) & (c != 0) & ~fast
        for i in np.flatnonzero(slow):
            result[i] = _fma_exact(float(a[i]), float(b[i]), float(c[i]))
    return result[0] if scalar else result


def _fma_exact(a: float, b: float, c: float) -> float:
    fma = getattr(math, "fma", None)  # Python >= 3.13
    if fma is not None:
        return float(fma(a, b, c))
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        return float(exact)  # int / int true division in CPython is correctly rounded
    except OverflowError:
        return math.inf if exact > 0 else -math.inf
