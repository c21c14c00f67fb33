"""What a Python expression denotes while a kernel is lowered, whatever the track, and the folding
of literals.

During lowering an expression is an IR `Value` (the track's strongly typed values), or one of:
  - a `Weak` literal (Python bool/int/float) that adopts the type of the other operand,
  - a `PyObj`: a compile-time Python object (module, dtype, device function, ...),
  - an `Undefined` marker for a variable assigned on some paths only.
Operators on two literals are evaluated here, at compile time, as Python would (`fold*`); a
literal meeting a typed operand is checked against that type (`literal_value`), and an operator
against the dtype of its operands (`check_operator`), with one wording for both tracks. How
typed operands meet belongs to each track (simt/emitter.py, tile/rules.py).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import dtypes
from ..dtypes import DType
from ..errors import CompileError, KernelTypeError, Location
from ..ir.core import Value

Scalar = bool | int | float


@dataclass(frozen=True)
class Weak:
    """A literal without a type of its own yet."""

    value: Scalar


@dataclass(frozen=True)
class PyObj:
    """A compile-time Python object referenced from the kernel."""

    obj: Any
    name: str


@dataclass(frozen=True)
class Undefined:
    """A variable that is unassigned on at least one path to here; `why` says how, if known."""

    name: str
    loc: Location
    why: str = ""


Operand = Value | Weak | PyObj | Undefined

PY_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
    "shl": operator.lshift,
    "shr": operator.rshift,
    "min": min,
    "max": max,
}
SYMBOL = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "floordiv": "//",
    "mod": "%",
    "pow": "**",
    "and": "&",
    "or": "|",
    "xor": "^",
    "shl": "<<",
    "shr": ">>",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
}
PY_CMPS: dict[str, Callable[[Any, Any], bool]] = {
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "eq": operator.eq,
    "ne": operator.ne,
}


# ----------------------------------------------------------------------------------- folding


def not_a_value(x: PyObj, loc: Location, values: str) -> CompileError:
    """E0001, in both tracks' words: a compile-time object (a string, a module, a helper's own
    object) where the kernel computes; `values` names what the track computes with. An object
    of the compiler's own may say what it is for (`value_help`, `value_label`: simt/chunks.py)."""
    if isinstance(x.obj, str):
        help = 'a string is a compile-time value: compare it (`if MODE == "relu":`)'
    else:
        help = getattr(x.obj, "value_help", None) or f"only {values} are values in kernels"
    return CompileError(
        f"`{x.name}` cannot be used as a value in a kernel",
        loc,
        label=getattr(x.obj, "value_label", ""),
        help=help,
    )


def fold(kind: str, a: object, b: object, loc: Location) -> Weak | None:
    """Binary operator or comparison `kind` on two literals, as Python evaluates it; None
    unless both operands are literals."""
    if not (isinstance(a, Weak) and isinstance(b, Weak)):
        return None
    if kind in PY_CMPS:
        return Weak(PY_CMPS[kind](a.value, b.value))
    try:
        return Weak(PY_BINOPS[kind](a.value, b.value))
    except (ZeroDivisionError, OverflowError, ValueError) as exc:
        sym = SYMBOL.get(kind, kind)
        raise CompileError(f"cannot evaluate `{a.value!r} {sym} {b.value!r}`: {exc}", loc) from None


def fold_unary(kind: str, a: Weak, loc: Location) -> Weak:
    """`pos`, `neg`, `not`, `abs` or `invert` of a literal; `~` takes integers only."""
    v = a.value
    if kind == "pos":
        return a
    if kind == "invert":
        if isinstance(v, float | bool):
            raise KernelTypeError("`~` needs an integer operand", loc)
        return Weak(~v)
    unary: dict[str, Callable[[Any], Any]] = {
        "neg": operator.neg,
        "not": operator.not_,
        "abs": abs,
    }
    return Weak(unary[kind](v))


# ---------------------------------------------------------------------------------- literals


def coerce_literal(value: Scalar, dtype: DType) -> Scalar:
    """`value` as the Python number a constant of `dtype` holds."""
    if dtype.is_float:
        return float(value)
    if dtype.is_bool:
        return bool(value)
    return int(value)


def literal_value(w: Weak, dtype: DType, loc: Location, help: str) -> Scalar:
    """The literal `w` as a constant of `dtype`, or the error that it does not fit."""
    if not dtypes.literal_fits(w.value, dtype):
        raise literal_misfit(w.value, dtype, loc, help)
    return coerce_literal(w.value, dtype)


def literal_misfit(
    value: Any, dtype: DType, loc: Location, help: str, what: str = ""
) -> KernelTypeError:
    """The error for a literal that `dtype` cannot hold (`dtypes.literal_fits` is False): a
    number a float type would round to inf overflows it; anything else cannot be used as it."""
    if dtype.is_float and not isinstance(value, bool):
        message = f"the literal `{value!r}` overflows {dtype.name}: it would be inf"
    else:
        message = f"the literal `{value!r}` cannot be used as {dtype.name}"
        message += f" in {what}" if what else ""
    return KernelTypeError(message, loc, label=f"expected {dtype.name}", help=help)


def overflow_help(dtype: DType, widen: str) -> str:
    """The help for a literal that overflows float `dtype`; `widen` says how, in the track's
    words, to compute in a wider type."""
    return (
        f"{dtype.name} holds magnitudes up to {dtypes.float_max(dtype):.6g}; {widen}, or write "
        "`math.inf` if inf is meant"
    )


# ------------------------------------------------------------------------------- operators

LOGIC = frozenset({"and", "or", "xor"})

# The operators a dtype lacks: (rule, operator kinds, whether the dtype lacks them, message).
# `{sym}` is the operator as written and `{dt}` the dtype; the first rule that applies is
# reported, with the track's help for that rule.
OPERATOR_RULES: tuple[tuple[str, frozenset[str], Callable[[DType], bool], str], ...] = (
    ("bool", frozenset(PY_BINOPS) - LOGIC, lambda dt: dt.is_bool, "`{sym}` is not defined on bool"),
    ("div", frozenset({"div"}), lambda dt: not dt.is_float,
     "`/` on {dt} operands: true division of integers is not defined in kernels"),
    ("bits", LOGIC | {"shl", "shr"}, lambda dt: dt.is_float, "`{sym}` needs integer operands, found {dt}"),
    ("not", frozenset({"not"}), lambda dt: not dt.is_bool, "`not` needs a bool operand, found {dt}"),
    ("invert", frozenset({"invert"}), lambda dt: not dt.is_int, "`~` needs an integer operand, found {dt}"),
    ("sign", frozenset({"neg", "abs"}), lambda dt: dt.is_bool, "`{sym}` is not defined on bool"),
)  # fmt: skip


def check_operator(kind: str, sym: str, dt: DType, loc: Location, help: Mapping[str, str]) -> None:
    """Raise if operator `kind` (written `sym`) is not defined on `dt`."""
    for rule, kinds, lacks, message in OPERATOR_RULES:
        if kind in kinds and lacks(dt):
            raise KernelTypeError(message.format(sym=sym, dt=dt.name), loc, help=help.get(rule))
