"""`fl.math`: math functions usable in kernels and, on NumPy values, on the host.

In a kernel each name lowers to the IR `math` op of the same name (libdevice on the GPU,
NumPy in the simulator). Python's own `math.exp/log/sqrt/...` are accepted in kernels too; in
kernels they keep the operand's float type (`math.floor(x)` of an f32 is an f32).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _unary(np_fn: Any, name: str) -> Any:
    def fn(x: Any) -> Any:
        return np_fn(x)

    fn.__name__ = name
    fn.__doc__ = f"`{name}(x)` in kernels and on NumPy values."
    return fn


exp = _unary(np.exp, "exp")
exp2 = _unary(np.exp2, "exp2")
expm1 = _unary(np.expm1, "expm1")
log = _unary(np.log, "log")
log2 = _unary(np.log2, "log2")
log10 = _unary(np.log10, "log10")
log1p = _unary(np.log1p, "log1p")
sqrt = _unary(np.sqrt, "sqrt")
cbrt = _unary(np.cbrt, "cbrt")
sin = _unary(np.sin, "sin")
cos = _unary(np.cos, "cos")
tan = _unary(np.tan, "tan")
asin = _unary(np.arcsin, "asin")
acos = _unary(np.arccos, "acos")
atan = _unary(np.arctan, "atan")
sinh = _unary(np.sinh, "sinh")
cosh = _unary(np.cosh, "cosh")
tanh = _unary(np.tanh, "tanh")
asinh = _unary(np.arcsinh, "asinh")
acosh = _unary(np.arccosh, "acosh")
atanh = _unary(np.arctanh, "atanh")
floor = _unary(np.floor, "floor")
ceil = _unary(np.ceil, "ceil")
trunc = _unary(np.trunc, "trunc")
fabs = _unary(np.abs, "fabs")


def rsqrt(x: Any) -> Any:
    """1 / sqrt(x)."""
    return 1 / np.sqrt(x)


def fma(a: Any, b: Any, c: Any) -> Any:
    """a * b + c with one rounding (in kernels; on the host computed in float64)."""
    return (np.asarray(a, np.float64) * b + c).astype(np.result_type(a, b, c))


def pow(x: Any, y: Any) -> Any:
    return np.power(x, y)


def atan2(y: Any, x: Any) -> Any:
    return np.arctan2(y, x)


def fmin(a: Any, b: Any) -> Any:
    return np.fmin(a, b)


def fmax(a: Any, b: Any) -> Any:
    return np.fmax(a, b)
