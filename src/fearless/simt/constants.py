"""Module-level NumPy arrays read in a SIMT kernel: read-only constant arrays, frozen when the
kernel compiles (numba's rule for global arrays).

    LUT = np.array([0.0, 0.5, 1.0, 0.5], dtype=np.float32)

    @simt.kernel
    def shade(x: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = LUT[x[i] % len(LUT)]       # a bounds-checked read of the constant

A name (or a module attribute, `tables.LUT`, or a closure variable) bound to a NumPy array of a
number or bool dtype, 1 to 3 axes and at most `MAX_CONST_BYTES` in all per kernel, becomes one
`const.array` op whose data are the array's bytes at compile time (`const_array`). Each array
is one op per kernel, hoisted into the entry block when lowering ends (`hoist`), so a guard
`if k < len(LUT)` proves the checks of the reads it dominates. Reads (`load_const`) index it as
a parameter array; writes are refused at compile time (E0594, `refuse_store`), and anything
else (an object array, a 0-d or 4-d array, too many bytes) is E0650 at the name.

The values are a snapshot: changing the array in place after the kernel compiled changes
nothing in that compiled form; binding the name to another array compiles again (globals are
followed by identity, frontend/source.py). `fingerprint` is what the cache key holds of an
array: its dtype, shape and a hash of its bytes.
"""

from __future__ import annotations

import ast
import hashlib
from typing import Any

import numpy as np

from .. import dtypes
from ..dtypes import DType
from ..errors import CompileError, KernelTypeError, Location, SafetyError
from ..frontend.values import Operand, Weak
from ..ir.core import ArrayType, Function, ThreadIndex2DType, Value
from ..ir.simt import ops
from .chunks import width_of
from .ssa import SsaLowerer

# The constant memory a kernel's arrays may take: 64 KiB, a GPU's constant bank for user data.
MAX_CONST_BYTES = 64 * 1024
MAX_CONST_AXES = 3
SLICE_HELP = (
    "pass it to the kernel as a parameter instead, `{name}: simt.Slice[fl.{dtype}{rank}]` "
    "(read-only, any size), and give the array at the launch"
)


def is_const_array(x: object) -> bool:
    return isinstance(x, Value) and isinstance(x.type, ArrayType) and x.type.const is not None


def element_type(arr: np.ndarray[Any, Any]) -> DType | None:
    """The fearless dtype of a NumPy array's elements, or None when kernels have none."""
    try:
        dt = dtypes.from_numpy(arr.dtype.newbyteorder("="))
    except (KeyError, TypeError, ValueError):
        return None
    return None if dt.is_raw else dt


def fingerprint(arr: np.ndarray[Any, Any], raw: bytes | None = None) -> str:
    """What the cache key holds of a module-level array: dtype, shape, sha256 of its bytes
    (`raw`, those a compile froze, or else its bytes now). An array too large to be a constant
    is held by dtype and shape only: it never compiles."""
    head = f"ndarray[{arr.dtype.str}, {arr.shape}]"
    if raw is None:
        if arr.nbytes > MAX_CONST_BYTES or arr.dtype.hasobject:
            return head
        raw = _bytes(arr)
    return f"{head}:{hashlib.sha256(raw).hexdigest()}"


def _bytes(arr: np.ndarray[Any, Any]) -> bytes:
    """The array's elements in C order, little-endian (bools as 0 or 1)."""
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()


def const_array(lw: SsaLowerer, arr: np.ndarray[Any, Any], name: str, loc: Location) -> Value:
    """The kernel's `const.array` for module-level array `arr` named `name` in the source:
    made at the first read of the kernel, reused after (while it is still in the IR: a loop
    lowered again drops what its first attempt emitted)."""
    ctx = lw.ctx
    held = ctx.constants.get(id(arr))
    if held is not None and held[0] is arr:
        if _live(ctx.fn, held[1]):
            return held[1].result
        ctx.const_bytes -= held[1].nbytes  # dropped with a loop's first attempt: made again
    dt = _check(arr, name, loc)
    total = ctx.const_bytes + arr.nbytes
    if total > MAX_CONST_BYTES:
        before = ""
        if ctx.const_bytes:
            before = f", and the kernel's other constant arrays {ctx.const_bytes}"
        raise CompileError(
            f"`{name}` takes {arr.nbytes} bytes{before}: more than the {MAX_CONST_BYTES} "
            "bytes of constant memory a kernel's module-level arrays may take",
            loc,
            code="E0650",
            label="too large for constant memory",
            help=_slice_help(name, dt, arr.ndim),
        )
    ctx.const_bytes = total
    raw = _bytes(arr)
    op = ops.ConstArray(dt, arr.shape, raw.hex(), loc, name)
    lw.em.emit(op)
    ctx.constants[id(arr)] = (arr, op, fingerprint(arr, raw))
    return op.result


def _live(fn: Function, op: ops.ConstArray) -> bool:
    b = op.block
    return b is not None and any(x is b for x in fn.blocks) and any(x is op for x in b.ops)


def _slice_help(name: str, dt: DType | None, ndim: int) -> str:
    rank = f", {ndim}" if ndim == 2 else ""
    base = name.rsplit(".", 1)[-1]
    text = SLICE_HELP.format(name=base.lower(), dtype=dt.name if dt else "f32", rank=rank)
    return text + (" (a 3-D array flattened, `.ravel()`)" if ndim > 2 else "")


def _check(arr: np.ndarray[Any, Any], name: str, loc: Location) -> DType:
    """The element type of `arr`, or E0650: kernels read numbers and bools, on 1 to 3 axes."""
    dt = element_type(arr)
    if dt is None:
        kinds = "bool, int8 to int64, uint8 to uint64, float16, float32 and float64"
        raise KernelTypeError(
            f"`{name}` is a NumPy array of {arr.dtype}: a kernel reads module-level arrays "
            "of numbers only",
            loc,
            code="E0650",
            label=f"an array of {arr.dtype}",
            help=f"convert it when you define it (`.astype(np.float32)`); the element types "
            f"a kernel reads are {kinds}",
        )
    if not 1 <= arr.ndim <= MAX_CONST_AXES or arr.size == 0:
        what = "empty" if arr.ndim and arr.size == 0 else f"{arr.ndim}-D"
        raise CompileError(
            f"`{name}` is a {what} NumPy array: a kernel reads module-level arrays of 1 to "
            f"{MAX_CONST_AXES} axes, with at least one element",
            loc,
            code="E0650",
            label=f"a {what} array",
            help="use a Python number for a single value; reshape a larger array, or "
            + _slice_help(name, dt, 1),
        )
    return dt


def hoist(fn: Function, constants: dict[int, tuple[Any, ops.ConstArray, str]]) -> None:
    """Move each constant array's op to the start of the entry block: it has no operands, so
    there it dominates every read, whichever branch read it first."""
    entry = fn.entry
    moved = [op for _, op, _ in constants.values() if _live(fn, op)]
    for op in moved:
        assert op.block is not None
        op.block.ops = [x for x in op.block.ops if x is not op]
        op.block = entry
    entry.ops = [*moved, *entry.ops]


def const_base(lw: SsaLowerer, base: ast.expr) -> Value | None:
    """The constant array `base` names (`LUT`, `tables.LUT`, a local bound to one), or None
    (then `base` is another array or an error, which access.py reports)."""
    plain = isinstance(base, ast.Name) or (isinstance(base, ast.Attribute) and base.attr != "shape")
    if not plain:
        return None
    value = lw.expr(base)
    return value if isinstance(value, Value) and is_const_array(value) else None


def load_const(lw: SsaLowerer, node: ast.Subscript, arr: Value) -> Value:
    """`LUT[i]`, `LUT[r, c]`, `LUT[t]` (a 2-D ThreadIndex): one integer per axis, each
    bounds-checked by the bounds pass like a Slice read."""
    assert isinstance(arr.type, ArrayType)
    name = arr.name or ast.unparse(node.value)
    ndim = arr.type.ndim
    loc = lw.loc(node.slice)
    if isinstance(node.slice, ast.Slice):
        raise CompileError(
            f"`{ast.unparse(node)}`: only single-element indexing is supported in kernels",
            loc,
            help="index one element at a time, e.g. `a[i]`",
        )
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    values: list[Any] = [lw.expr(e) for e in items]
    if len(values) == 1 and isinstance(values[0], tuple):  # `LUT[simt.grid(2)]`
        values, items = list(values[0]), items * len(values[0])
    em = lw.em
    if len(values) == 1 and isinstance(values[0], Value) and ndim == 2:
        t = values[0]
        if isinstance(t.type, ThreadIndex2DType) and t.type.width == 1:
            idx = [em.emit(ops.ThreadIndexAxis(t, axis, loc)).result for axis in (0, 1)]
            return em.emit(ops.Load(arr, idx, lw.loc(node))).result
    if len(values) != ndim:
        axes = ", ".join("ijk"[:ndim])
        raise CompileError(
            f"`{name}` is a {ndim}-D constant array: index it with {ndim} "
            f"integer{'s' * (ndim > 1)}, `{name}[{axes}]`",
            loc,
            label=f"{len(values)} ind{'ex' if len(values) == 1 else 'ices'}",
        )
    idx = [_index(lw, v, name, lw.loc(e)) for v, e in zip(values, items, strict=True)]
    return em.emit(ops.Load(arr, idx, lw.loc(node))).result


def _index(lw: SsaLowerer, x: Operand, name: str, loc: Location) -> Value:
    """One index into a constant array, as an i64: a literal >= 0 or an integer value."""
    if isinstance(x, Weak) and type(x.value) is int and x.value < 0:
        raise CompileError(
            f"negative index `{x.value}`: kernels do not count from the end",
            loc,
            help=f"write `len({name}) - {-x.value}`",
        )
    bad = isinstance(x, Weak) and type(x.value) is not int
    v = None if bad or width_of(x) > 1 else lw.em.scalar(x, loc, "index")
    if isinstance(v, Weak):
        return lw.em.const(int(v.value), dtypes.i64, loc)
    if not isinstance(v, Value) or not v.dtype.is_int:
        found = f", found {v.dtype.name}" if isinstance(v, Value) else ""
        raise KernelTypeError(
            f"an array index must be an integer{found}", loc, help="convert it with `int(x)`"
        )
    return lw.em.cast(v, dtypes.i64, loc)


def refuse_store(arr: Value, target: ast.Subscript, loc: Location) -> SafetyError:
    """E0594: a constant array is never written."""
    assert isinstance(arr.type, ArrayType)
    name = arr.name or ast.unparse(target.value)
    dt, ndim = arr.type.dtype, arr.type.ndim
    rank = f", {ndim}" if ndim > 1 else ""
    return SafetyError(
        f"cannot assign to `{ast.unparse(target)}`, as `{name}` is a module-level NumPy "
        "array: a kernel reads it as a constant",
        loc,
        code="E0594",
        label="cannot assign",
        notes=[
            f"the values of `{name}` were copied into the kernel when it compiled; every "
            "thread reads the same copy"
        ],
        help=f"to write an array, pass it as a parameter, `{name.rsplit('.', 1)[-1].lower()}"
        f": simt.DisjointSlice[fl.{dt.name}{rank}]`",
    )
