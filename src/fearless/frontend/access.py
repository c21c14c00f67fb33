"""Array element access and the SIMT witness rules, enforced while lowering.

Rules (DESIGN section 2, SafetyError at compile time):
  - a `Slice` is read-only: any write to it is E0594;
  - a `DisjointSlice` is read and written only at the thread's own `ThreadIndex` (E0601):
    `c[i]` where `i = simt.thread.index_1d()`; `c[i + 1]`, `c[j]` or `c[int(i)]` are rejected
    because another thread owns those elements;
  - a `ThreadIndex` is never stored into an array (E0602): store `int(i)` to keep its value.
Loads and stores are emitted unchecked; the bounds pass adds the checks it cannot prove away.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .. import dtypes
from ..errors import CompileError, KernelTypeError, Location, SafetyError
from ..ir import ops
from ..ir.core import ArrayType, ScalarType, Value
from .values import Operand, Weak, is_thread_index

if TYPE_CHECKING:
    from .lower import FunctionLowerer


def _array(lw: FunctionLowerer, node: ast.Subscript) -> Value:
    base = lw.expr(node.value)
    if isinstance(base, Value) and isinstance(base.type, ArrayType):
        return base
    raise KernelTypeError(
        f"`{ast.unparse(node.value)}` cannot be indexed: it is {_describe(base)}",
        lw.loc(node.value),
        help="only `Slice` and `DisjointSlice` parameters can be indexed",
    )


def _describe(x: Operand) -> str:
    if isinstance(x, Value):
        return f"a {x.type}"
    if isinstance(x, Weak):
        return "a number"
    return "not an array"


def _index(lw: FunctionLowerer, arr: Value, node: ast.Subscript, write: bool) -> Value:
    """The i64 index of `arr[...]`, after the witness rule for DisjointSlices."""
    em = lw.em
    idx_node = node.slice
    loc = lw.loc(idx_node)
    if isinstance(idx_node, ast.Slice | ast.Tuple):
        raise CompileError(
            f"`{ast.unparse(node)}`: only single-element indexing is supported in kernels",
            loc,
            help="index one element at a time, e.g. `a[i]`",
        )
    idx = lw.expr(idx_node)
    assert isinstance(arr.type, ArrayType)
    name = arr.name or ast.unparse(node.value)
    if arr.type.disjoint and not is_thread_index(idx) and not lw.ctx.unsafe:
        verb = "written" if write else "read"
        raise SafetyError(
            f"`{name}` is a DisjointSlice: it can only be {verb} at this thread's own index",
            loc,
            code="E0601",
            label="not this thread's index",
            help=(
                f"index `{name}` with the value of `simt.thread.index_1d()` itself; "
                "other elements belong to other threads (read shared inputs from a `Slice`)"
            ),
        )
    if isinstance(idx, Weak):
        if isinstance(idx.value, bool) or not isinstance(idx.value, int):
            raise KernelTypeError("an array index must be an integer", loc)
        if idx.value < 0:
            raise CompileError(
                f"negative index `{idx.value}`: kernels do not count from the end",
                loc,
                help=f"write `len({name}) - {-idx.value}`",
            )
        return em.const(idx.value, dtypes.i64, loc)
    v = em.scalar(idx, loc, "index")
    assert isinstance(v, Value)
    if not v.dtype.is_int:
        raise KernelTypeError(
            f"an array index must be an integer, found {v.dtype.name}",
            loc,
            help="convert it with `int(x)`",
        )
    return em.cast(v, dtypes.i64, loc)


def load(lw: FunctionLowerer, node: ast.Subscript, loc: Location) -> Value:
    arr = _array(lw, node)
    idx = _index(lw, arr, node, write=False)
    return lw.em.emit(ops.Load(arr, idx, loc)).result


def store(lw: FunctionLowerer, node: ast.Subscript, value: Operand, loc: Location) -> None:
    arr = _array(lw, node)
    assert isinstance(arr.type, ArrayType)
    name = arr.name or ast.unparse(node.value)
    if not arr.type.disjoint:
        raise SafetyError(
            f"cannot assign to `{ast.unparse(node)}`, as `{name}` is a read-only `Slice`",
            loc,
            code="E0594",
            label="cannot assign",
            help=f"declare `{name}` as `simt.DisjointSlice[fl.{arr.type.dtype.name}]` to write it",
        )
    idx = _index(lw, arr, node, write=True)
    if is_thread_index(value):
        raise SafetyError(
            "a ThreadIndex cannot be stored into an array",
            loc,
            code="E0602",
            help="store its plain value instead: `int(i)`",
        )
    dt = arr.type.dtype
    em = lw.em
    v = em.scalar(value, loc, "value")
    if isinstance(v, Value) and v.type != ScalarType(dt):
        raise KernelTypeError(
            f"cannot store {v.dtype.name} into `{name}`, whose elements are {dt.name}",
            loc,
            label=f"expected {dt.name}",
            help=f"convert the value: `fl.{dt.name}(...)`",
        )
    val = em.as_value(v, loc, dt)
    em.emit(ops.Store(arr, idx, val, loc))
