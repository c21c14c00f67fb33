"""What a Python expression denotes while a kernel is lowered, and the typing rules.

During lowering an expression is one of:
  - an IR `Value` (a strongly typed scalar, array, or ThreadIndex),
  - a `Weak` literal (Python bool/int/float) that adopts the type of the other operand,
  - a `PyObj`: a compile-time Python object (module, dtype, device function, ...),
  - an `Undefined` marker for a variable assigned on some paths only.
`Emitter` appends ops at the current block and implements the operator typing rules of
DESIGN section 2 in one place: weak literals adopt, strong types never mix silently.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import dtypes
from ..dtypes import DType
from ..errors import CompileError, KernelTypeError, Location
from ..ir import ops
from ..ir.core import (
    Block,
    Function,
    Op,
    ScalarType,
    ThreadIndex2DType,
    ThreadIndexType,
    Type,
    Value,
)


@dataclass(frozen=True)
class Weak:
    """A literal without a type of its own yet."""

    value: bool | int | float


@dataclass(frozen=True)
class PyObj:
    """A compile-time Python object referenced from the kernel."""

    obj: Any
    name: str


@dataclass(frozen=True)
class Undefined:
    """A variable that is unassigned on at least one path to here."""

    name: str
    loc: Location


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


def type_name(x: Operand) -> str:
    if isinstance(x, Value):
        return str(x.type)
    if isinstance(x, Weak):
        return f"{type(x.value).__name__} literal"
    if isinstance(x, PyObj):
        return f"`{x.name}`"
    return "undefined"


class Emitter:
    """Appends ops to the current block of `fn` and applies the typing rules."""

    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.block: Block | None = None
        # Called with (value, wanted type) before a type mismatch is reported, so that a loop
        # whose header type was guessed from a literal can be re-lowered (see lower.py).
        self.on_mismatch: Callable[[Value, DType], None] | None = None

    def emit(self, op: Op) -> Op:
        assert self.block is not None, "emitting into unreachable code"
        return self.block.append(op)

    # ---------------------------------------------------------------- materialising values

    def const(self, value: bool | int | float, dtype: DType, loc: Location) -> Value:
        if dtype.is_float:
            value = float(value)
        elif dtype.is_bool:
            value = bool(value)
        else:
            value = int(value)
        return self.emit(ops.Constant(value, dtype, loc)).result

    def as_value(self, x: Operand, loc: Location, want: DType | None = None) -> Value:
        """A strong IR value for `x`; a Weak becomes `want` (or its default type)."""
        if isinstance(x, Weak):
            dt = want or dtypes.literal_default(x.value)
            if not dtypes.literal_fits(x.value, dt):
                raise KernelTypeError(
                    f"the literal `{x.value!r}` cannot be used as {dt.name}",
                    loc,
                    label=f"expected {dt.name}",
                    help=_literal_help(x.value, dt),
                )
            return self.const(x.value, dt, loc)
        if isinstance(x, Value):
            if isinstance(x.type, ThreadIndexType) and want is not None:
                x = self.index_int(x, loc)
            if isinstance(x.type, ThreadIndex2DType) and want is not None:
                raise witness_2d_not_a_value("value", loc)
            return x
        raise self.not_a_value(x, loc)

    def index_int(self, x: Value, loc: Location) -> Value:
        if isinstance(x.type, ThreadIndexType):
            return self.emit(ops.IndexToInt(x, loc)).result
        return x

    def scalar(self, x: Operand, loc: Location, what: str = "operand") -> Value | Weak:
        """A scalar operand: ThreadIndex becomes its i64 value; arrays are an error."""
        if isinstance(x, Weak):
            return x
        if isinstance(x, Value):
            if isinstance(x.type, ThreadIndexType):
                return self.index_int(x, loc)
            if isinstance(x.type, ScalarType):
                return x
            if isinstance(x.type, ThreadIndex2DType):
                raise witness_2d_not_a_value(what, loc)
            raise KernelTypeError(
                f"expected a scalar {what}, found `{x.type}`",
                loc,
                help="index the array to get one element, e.g. `a[i]`",
            )
        raise self.not_a_value(x, loc)

    def not_a_value(self, x: Operand, loc: Location) -> Exception:
        if isinstance(x, Undefined):
            return CompileError(
                f"`{x.name}` may be used before it is assigned",
                loc,
                code="E0381",
                label="possibly unassigned here",
                help=f"assign `{x.name}` on every path before this line",
            )
        assert isinstance(x, PyObj)
        return CompileError(
            f"`{x.name}` cannot be used as a value in a kernel",
            loc,
            help="only scalars, arrays and thread indices are values in kernels",
        )

    def cast(self, x: Value, to: DType, loc: Location) -> Value:
        if isinstance(x.type, ThreadIndexType):
            x = self.index_int(x, loc)
        if x.type == ScalarType(to):
            return x
        return self.emit(ops.Cast(x, to, loc)).result

    # --------------------------------------------------------------------- type unification

    def unify(self, a: Value | Weak, b: Value | Weak, loc: Location, what: str) -> DType:
        """The common dtype of two scalar operands, or a KernelTypeError naming the fix."""
        if isinstance(a, Weak) and isinstance(b, Weak):
            return dtypes.literal_default(a.value if isinstance(a.value, float) else b.value)
        if isinstance(a, Weak):
            a, b = b, a
        assert isinstance(a, Value)
        da = a.dtype
        if isinstance(b, Weak):
            if not dtypes.literal_fits(b.value, da):
                raise KernelTypeError(
                    f"the literal `{b.value!r}` cannot be used as {da.name} in {what}",
                    loc,
                    help=_literal_help(b.value, da),
                )
            return da
        db = b.dtype
        if da != db:
            if self.on_mismatch is not None:
                self.on_mismatch(a, db)
                self.on_mismatch(b, da)
            raise KernelTypeError(
                f"mismatched types in {what}: {da.name} and {db.name}",
                loc,
                label=f"{da.name} and {db.name}",
                help=f"convert one side explicitly, e.g. `fl.{_wider(da, db).name}(x)`",
            )
        return da

    # ------------------------------------------------------------------------- arithmetic

    def binary(self, kind: str, lhs: Operand, rhs: Operand, loc: Location) -> Value | Weak:
        a = self.scalar(lhs, loc)
        b = self.scalar(rhs, loc)
        sym = SYMBOL[kind]
        if isinstance(a, Weak) and isinstance(b, Weak):
            return _fold(kind, a.value, b.value, loc)
        dt = self.unify(a, b, loc, f"`{sym}`")
        if dt.is_bool and kind not in ("and", "or", "xor"):
            raise KernelTypeError(
                f"`{sym}` is not defined on bool",
                loc,
                help="convert with `fl.i32(b)` first, or use `and`/`or` for logic",
            )
        if kind == "div" and not dt.is_float:
            raise KernelTypeError(
                f"`/` on {dt.name} operands: true division of integers is not defined in kernels",
                loc,
                help="use `//` for floor division, or convert: `fl.f32(a) / fl.f32(b)`",
            )
        if kind in ("and", "or", "xor", "shl", "shr") and dt.is_float:
            raise KernelTypeError(f"`{sym}` needs integer operands, found {dt.name}", loc)
        va = self.as_value(a, loc, dt)
        vb = self.as_value(b, loc, dt)
        if kind == "pow" and dt.is_float:
            return self.emit(ops.MathCall("pow", [va, vb], loc)).result
        return self.emit(ops.Binary(kind, va, vb, loc)).result

    def compare(self, pred: str, lhs: Operand, rhs: Operand, loc: Location) -> Value | Weak:
        a = self.scalar(lhs, loc)
        b = self.scalar(rhs, loc)
        if isinstance(a, Weak) and isinstance(b, Weak):
            return Weak(PY_CMPS[pred](a.value, b.value))
        dt = self.unify(a, b, loc, f"`{SYMBOL[pred]}`")
        va = self.as_value(a, loc, dt)
        vb = self.as_value(b, loc, dt)
        return self.emit(ops.Compare(pred, va, vb, loc)).result

    def unary(self, kind: str, x: Operand, loc: Location) -> Value | Weak:
        a = self.scalar(x, loc)
        if isinstance(a, Weak):
            v = a.value
            if kind == "neg":
                return Weak(-v)
            if kind == "not":
                return Weak(not v)
            if kind == "abs":
                return Weak(abs(v))
            if isinstance(v, float | bool):
                raise KernelTypeError("`~` needs an integer operand", loc)
            return Weak(~v)
        dt = a.dtype
        if kind == "not" and not dt.is_bool:
            raise KernelTypeError(
                f"`not` needs a bool operand, found {dt.name}",
                loc,
                help="compare explicitly, e.g. `x == 0`",
            )
        if kind == "invert" and not dt.is_int:
            raise KernelTypeError(
                f"`~` needs an integer operand, found {dt.name}", loc, help="use `not` for booleans"
            )
        if kind in ("neg", "abs") and dt.is_bool:
            raise KernelTypeError(f"`{kind}` is not defined on bool", loc)
        return self.emit(ops.Unary(kind, a, loc)).result

    def truth(self, x: Operand, loc: Location) -> Value | Weak:
        """A condition: must be bool (no implicit truthiness of numbers in kernels)."""
        a = self.scalar(x, loc, "condition")
        if isinstance(a, Weak):
            return Weak(bool(a.value))
        if not a.dtype.is_bool:
            raise KernelTypeError(
                f"a condition must be bool, found {a.dtype.name}",
                loc,
                help="compare explicitly, e.g. `if x != 0:`",
            )
        return a


def _fold(kind: str, a: Any, b: Any, loc: Location) -> Weak:
    try:
        return Weak(PY_BINOPS[kind](a, b))
    except (ZeroDivisionError, OverflowError, ValueError) as exc:
        raise CompileError(f"cannot evaluate `{a!r} {SYMBOL[kind]} {b!r}`: {exc}", loc) from exc


def _wider(a: DType, b: DType) -> DType:
    if a.is_float != b.is_float:
        return a if a.is_float else b
    return a if a.bits >= b.bits else b


def _literal_help(value: Any, dt: DType) -> str:
    if isinstance(value, float) and dt.is_int:
        return "convert the other operand, e.g. `fl.f32(x)`, or write an integer literal"
    if isinstance(value, int) and not isinstance(value, bool) and dt.is_int:
        lo, hi = dtypes.int_range(dt)
        return f"{dt.name} holds {lo}..{hi}; widen the other operand, e.g. `fl.i64(x)`"
    return f"convert explicitly, e.g. `fl.{dt.name}(...)`"


def is_thread_index(x: Operand) -> bool:
    """The 1-D witness `simt.thread.index_1d()` (or a value merged from several of them)."""
    return isinstance(x, Value) and isinstance(x.type, ThreadIndexType)


def is_thread_index_2d(x: Operand) -> bool:
    """The 2-D witness `simt.thread.index_2d()`."""
    return isinstance(x, Value) and isinstance(x.type, ThreadIndex2DType)


def witness_2d_not_a_value(what: str, loc: Location) -> KernelTypeError:
    return KernelTypeError(
        f"expected a scalar {what}, found a 2-D ThreadIndex",
        loc,
        label="a (row, col) pair",
        help="use its coordinates `t.row` and `t.col`, which are plain integers",
    )


def value_type(x: Value | Weak, hint: Type | None = None) -> Type:
    if isinstance(x, Weak):
        if isinstance(hint, ScalarType) and dtypes.literal_fits(x.value, hint.dtype):
            return hint
        return ScalarType(dtypes.literal_default(x.value))
    return x.type
