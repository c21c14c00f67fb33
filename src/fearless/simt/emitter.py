"""The SIMT track's typing rules, applied as ops are appended: `Emitter`.

`Emitter` appends ops at the current block of the kernel's CFG and implements the operator
typing rules of DESIGN section 2 in one place: weak literals adopt the other operand's type,
strong types never mix silently, conditions are bool, a ThreadIndex is an i64 where a number
is wanted (and the 2-D one never is).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import dtypes
from ..dtypes import DType
from ..errors import KernelTypeError, Location
from ..frontend.core import unassigned
from ..frontend.values import (
    SYMBOL,
    Operand,
    PyObj,
    Undefined,
    Weak,
    check_operator,
    coerce_literal,
    fold,
    fold_unary,
    literal_misfit,
    literal_value,
    not_a_value,
    overflow_help,
)
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
from ..ir.simt import ops

# The help for each operator rule (frontend/values.py, `OPERATOR_RULES`) in SIMT terms.
_OPERATOR_HELP = {
    "bool": "convert with `fl.i32(b)` first, or use `and`/`or` for logic",
    "div": "use `//` for floor division, or convert: `fl.f32(a) / fl.f32(b)`",
    "not": "compare explicitly, e.g. `x == 0`",
    "invert": "use `not` for booleans",
}


class Emitter:
    """Appends ops to the current block of `fn` and applies the typing rules."""

    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.block: Block | None = None
        # Called with (value, wanted type) before a type mismatch is reported, so that a loop
        # whose header type was guessed from a literal can be re-lowered (frontend/loops.py).
        self.on_mismatch: Callable[[Value, DType], None] | None = None
        # Values typed by Python (`lo: float`, `n: int` parameters, and what only they and
        # literals compute): like a literal, they adopt the other operand's dtype at a use.
        self.weak: set[Value] = set()

    def is_weak(self, x: object) -> bool:
        return isinstance(x, Value) and x in self.weak

    def adopts(self, x: Value, to: DType) -> bool:
        """Whether the weak value `x` (f64 or i64) may become `to` at a use: a float only a
        float, an int any number (converted as `fl.<to>(x)` converts)."""
        return not to.is_bool and (to.is_float or not x.dtype.is_float)

    def emit(self, op: Op) -> Op:
        assert self.block is not None, "emitting into unreachable code"
        return self.block.append(op)

    # ---------------------------------------------------------------- materialising values

    def const(self, value: bool | int | float, dtype: DType, loc: Location) -> Value:
        return self.emit(ops.Constant(coerce_literal(value, dtype), dtype, loc)).result

    def as_value(self, x: Operand, loc: Location, want: DType | None = None) -> Value:
        """A strong IR value for `x`; a Weak becomes `want` (or its default type)."""
        if isinstance(x, Weak):
            dt = want or dtypes.literal_default(x.value)
            return self.const(literal_value(x, dt, loc, _literal_help(x.value, dt)), dt, loc)
        if isinstance(x, Value):
            if want is not None and x in self.weak and x.type != ScalarType(want):
                return self.cast(x, want, loc)
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
            return unassigned(x.name, loc, x.why)
        assert isinstance(x, PyObj)
        return not_a_value(x, loc, "scalars, arrays and thread indices")  # SsaLowerer.VALUE_KINDS

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
        if self.is_weak(a) or self.is_weak(b):
            return self._unify_weak(a, b, loc, what)
        if isinstance(a, Weak):
            a, b = b, a
        assert isinstance(a, Value)
        da = a.dtype
        if isinstance(b, Weak):
            if not dtypes.literal_fits(b.value, da):
                raise literal_misfit(b.value, da, loc, _literal_help(b.value, da), what)
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
                help=f"convert one side explicitly: `fl.{da.name}(...)` to compute in {da.name}, "
                f"or `fl.{db.name}(...)` for {db.name}",
            )
        return da

    def _unify_weak(self, a: Value | Weak, b: Value | Weak, loc: Location, what: str) -> DType:
        """Unify where a weak value (a `float`/`int` parameter) meets another operand."""
        if (self.is_weak(a) or isinstance(a, Weak)) and (self.is_weak(b) or isinstance(b, Weak)):
            floats = [
                x.dtype.is_float if isinstance(x, Value) else isinstance(x.value, float)
                for x in (a, b)
            ]
            return dtypes.f64 if any(floats) else dtypes.i64  # Python's own rule
        weak, strong = (a, b) if self.is_weak(a) else (b, a)
        assert isinstance(weak, Value) and isinstance(strong, Value)
        if self.adopts(weak, strong.dtype):
            return strong.dtype
        kind = "float" if weak.dtype.is_float else "int"
        raise KernelTypeError(
            f"`{weak.name or 'value'}` (a `{kind}` parameter) cannot be used as "
            f"{strong.dtype.name} in {what}",
            loc,
            label=f"{kind} and {strong.dtype.name}",
            help=f"convert explicitly, e.g. `fl.{strong.dtype.name}({weak.name or 'x'})`, or "
            f"convert the other operand, e.g. `fl.f32(...)`",
        )

    def mark_weak(self, result: Value, *operands: Operand) -> Value:
        """`result` is weak when every operand is weak (a literal or a weak value)."""
        if any(self.is_weak(x) for x in operands) and all(
            isinstance(x, Weak) or self.is_weak(x) for x in operands
        ):
            self.weak.add(result)
        return result

    # ------------------------------------------------------------------------- arithmetic

    def _unified(
        self, kind: str, lhs: Operand, rhs: Operand, loc: Location, what: str
    ) -> Weak | tuple[DType, Value, Value]:
        """Both operands as values of their common dtype, or `kind` folded on two literals."""
        a, b = self.scalar(lhs, loc), self.scalar(rhs, loc)
        folded = fold(kind, a, b, loc)
        if folded is not None:
            return folded
        dt = self.unify(a, b, loc, what)
        return dt, self.as_value(a, loc, dt), self.as_value(b, loc, dt)

    def binary(self, kind: str, lhs: Operand, rhs: Operand, loc: Location) -> Value | Weak:
        sym = SYMBOL[kind]
        operands = self._unified(kind, lhs, rhs, loc, f"`{sym}`")
        if isinstance(operands, Weak):
            return operands
        dt, va, vb = operands
        check_operator(kind, sym, dt, loc, _OPERATOR_HELP)
        if kind == "pow" and dt.is_float:
            return self.mark_weak(self.emit(ops.MathCall("pow", [va, vb], loc)).result, lhs, rhs)
        return self.mark_weak(self.emit(ops.Binary(kind, va, vb, loc)).result, lhs, rhs)

    def minmax(self, kind: str, lhs: Operand, rhs: Operand, loc: Location) -> Value | Weak:
        operands = self._unified(kind, lhs, rhs, loc, f"{kind}()")
        if isinstance(operands, Weak):
            return operands
        result = self.emit(ops.Binary(kind, operands[1], operands[2], loc)).result
        return self.mark_weak(result, lhs, rhs)

    def compare(self, pred: str, lhs: Operand, rhs: Operand, loc: Location) -> Value | Weak:
        operands = self._unified(pred, lhs, rhs, loc, f"`{SYMBOL[pred]}`")
        if isinstance(operands, Weak):
            return operands
        return self.emit(ops.Compare(pred, operands[1], operands[2], loc)).result

    def unary(self, kind: str, x: Operand, loc: Location) -> Value | Weak:
        a = self.scalar(x, loc)
        if isinstance(a, Weak):
            return fold_unary(kind, a, loc)
        check_operator(kind, kind, a.dtype, loc, _OPERATOR_HELP)
        return self.mark_weak(self.emit(ops.Unary(kind, a, loc)).result, a)

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


def _literal_help(value: Any, dt: DType) -> str:
    if isinstance(value, float) and dt.is_int:
        return "convert the other operand, e.g. `fl.f32(x)`, or write an integer literal"
    if isinstance(value, int) and not isinstance(value, bool) and dt.is_int:
        lo, hi = dtypes.int_range(dt)
        return f"{dt.name} holds {lo}..{hi}; widen the other operand, e.g. `fl.i64(x)`"
    if dt.is_float and not isinstance(value, bool):
        return overflow_help(dt, "compute in a wider type (`fl.f64(x)`)")
    return f"convert explicitly, e.g. `fl.{dt.name}(...)`"


def is_thread_index(x: Operand) -> bool:
    """The 1-D witness `simt.thread.index_1d()` (or a value merged from several of them); not
    the block index `block_index_1d()`, which is unique only within a block."""
    return isinstance(x, Value) and isinstance(x.type, ThreadIndexType) and not x.type.block


def is_thread_index_2d(x: Operand) -> bool:
    """The 2-D witness `simt.thread.index_2d()` (not the block pair `block_index_2d()`)."""
    return isinstance(x, Value) and isinstance(x.type, ThreadIndex2DType) and not x.type.block


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
