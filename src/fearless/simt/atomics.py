"""`simt.atomic.add/sub/max/min/exch/cas/...`: the frontend rule of the SIMT atomics.

An atomic acts on one element of an `AtomicSlice` at any integer index (checked against the
length by the bounds pass, like a read) and returns the element's old value. A 2-D
`AtomicSlice[T, 2]` takes a pair, as numba's `cuda.atomic.add(ary, (i, j), v)`: a tuple
`(row, col)`, `simt.grid(2)`, or a 2-D ThreadIndex; each axis gets its own check. The rules
(DESIGN 2b, SafetyError or KernelTypeError at the user's line):
  - the array must be an `AtomicSlice` or a block's `simt.shared.array` (E0611): a `Slice` is
    read-only, a `DisjointSlice` element belongs to one thread, and a local array to its
    thread, so none may be updated by any thread at any index. A shared array takes atomics
    only in a barrier phase without plain reads or writes of it (`sync_check.py`, E0632);
  - the values have the element type: weak literals adopt it, strong values must match
    (E0308), and a ThreadIndex is never stored (E0602);
  - f16 and bf16 elements take only `add` and `sub`, 8- and 16-bit integers (shared arrays
    may hold them) none; `and_`, `or_`, `xor` integers; the
    wrapping counters `inc` and `dec` u32 and u64 (as numba); `cas` compares bit patterns;
  - the index has one integer per axis (E0308).
Plain reads and writes of an `AtomicSlice` are refused in `access.py` (E0610).
`intrinsics.py` declares the intrinsics with these rules.
"""

from __future__ import annotations

from ..errors import KernelTypeError, Location, SafetyError
from ..frontend.intrinsics import Call
from ..frontend.values import Operand
from ..ir.core import ArrayType, ThreadIndex2DType, Value
from ..ir.simt import ops
from .access import _int_index as int_index
from .access import describe_operand
from .emitter import is_thread_index, is_thread_index_2d
from .ssa import SsaLowerer

# The element types each atomic accepts, beyond the ints and f32/f64 all of them take.
HALF_FLOAT_KINDS = frozenset(("add", "sub"))


def atomic_rmw(lw: SsaLowerer, call: Call) -> Value:
    """`simt.atomic.<kind>(ary, idx, val)`: the old value of `ary[idx]`."""
    kind = call.callee.__name__
    arr = _atomic_array(lw, call, kind)
    index = _indices(lw, call, arr, kind)
    value = _value(lw, call, arr, 2, kind)
    return lw.em.emit(ops.AtomicRMW(kind, arr, index, value, call.loc)).result


def atomic_cas(lw: SsaLowerer, call: Call) -> Value:
    """`simt.atomic.cas(ary, idx, old, val)`: stores `val` if `ary[idx]` is `old`; the old
    value of `ary[idx]` either way."""
    arr = _atomic_array(lw, call, "cas")
    index = _indices(lw, call, arr, "cas")
    expected = _value(lw, call, arr, 2, "cas")
    value = _value(lw, call, arr, 3, "cas")
    return lw.em.emit(ops.AtomicCAS(arr, index, expected, value, call.loc)).result


def _atomic_array(lw: SsaLowerer, call: Call, kind: str) -> Value:
    a = call.args[0]
    loc = call.arg_loc(0)
    if not (isinstance(a, Value) and isinstance(a.type, ArrayType)):
        raise KernelTypeError(
            f"`simt.atomic.{kind}` updates an element of an array, found {describe_operand(a, 'something else')}",
            loc,
            label="not an array",
            help="pass an `simt.AtomicSlice[T]` parameter: `simt.atomic.add(counts, i, 1)`",
        )
    t = a.type
    name = a.name or "the array"
    if not (t.atomic or t.shared is not None):
        raise _not_atomic(kind, name, t, loc)
    dt = t.dtype
    if kind in ops.BITWISE_ATOMIC_KINDS and not dt.is_int:
        raise KernelTypeError(
            f"`simt.atomic.{kind}` is a bitwise operation, but `{name}` holds {dt.name}",
            call.loc,
            label=f"{dt.name} elements",
            help="declare the AtomicSlice with integer elements (i32, u32, i64, u64)",
        )
    if kind in ops.WRAPPING_ATOMIC_KINDS and dt.name not in ops.WRAPPING_ATOMIC_DTYPES:
        raise KernelTypeError(
            f"`simt.atomic.{kind}` is a wrapping counter on u32 or u64 elements, but `{name}` "
            f"holds {dt.name}",
            call.loc,
            label=f"{dt.name} elements",
            help=f"declare `{name}: simt.AtomicSlice[fl.u32]` (or fl.u64); for a signed "
            f"counter without wrapping use `simt.atomic.{'add' if kind == 'inc' else 'sub'}`",
        )
    if dt.bits < 32 and (dt.is_int or kind not in HALF_FLOAT_KINDS):
        raise KernelTypeError(
            f"`simt.atomic.{kind}` on {dt.name} elements is not supported",
            call.loc,
            label=f"{dt.name} elements",
            help=f"declare `{name}` with 32- or 64-bit elements for `{kind}`"
            if dt.is_int
            else f"{dt.name} elements take only `simt.atomic.add` and `simt.atomic.sub`; "
            f"declare `{name}` with f32 elements for `{kind}`",
        )
    return a


def _not_atomic(kind: str, name: str, t: ArrayType, loc: Location) -> SafetyError:
    """E0611: an atomic on a `Slice`, a `DisjointSlice` or a local array."""
    if t.local is not None:
        return SafetyError(
            f"`simt.atomic.{kind}` updates memory that threads share, not a local array",
            loc,
            code="E0611",
            label="a thread's own array",
            help="no other thread sees a `simt.local.array`: update it with a plain read and "
            "write, `v[k] = v[k] + x`; for a block's counters use `simt.shared.array`, for "
            "the launch's an `simt.AtomicSlice` parameter",
        )
    why = "it is read-only for the whole launch"
    if t.disjoint:
        why = "each of its elements belongs to one thread"
    return SafetyError(
        f"`simt.atomic.{kind}` needs an AtomicSlice, but `{name}` is a {t.kind}",
        loc,
        code="E0611",
        label=f"a {t.kind}",
        help=f"declare the parameter `{name}: simt.AtomicSlice[fl.{t.dtype.name}]`; "
        f"a {t.kind} cannot be updated at any index because {why}",
    )


def _indices(lw: SsaLowerer, call: Call, arr: Value, kind: str) -> list[Value]:
    """The index argument as one i64 per axis of `arr`: an integer for a 1-D AtomicSlice;
    `(row, col)`, `simt.grid(2)` or a 2-D ThreadIndex for a 2-D one."""
    assert isinstance(arr.type, ArrayType)
    x: Operand | tuple[Operand, ...] = call.args[1]
    loc = call.arg_loc(1)
    name = arr.name or "the array"
    ndim = arr.type.ndim
    if isinstance(x, Value) and isinstance(x.type, ThreadIndex2DType):
        x = tuple(lw.em.emit(ops.ThreadIndexAxis(x, axis, loc)).result for axis in (0, 1))
    if ndim == 1 and isinstance(x, tuple) and len(x) == 1:
        x = x[0]  # numba's `(i,)`
    got = len(x) if isinstance(x, tuple) else 1
    if got != ndim:
        form = "`i`" if ndim == 1 else "a pair `(row, col)`"
        example = f"simt.atomic.{kind}({name}, {'i' if ndim == 1 else '(r, c)'}, ...)"
        raise KernelTypeError(
            f"`simt.atomic.{kind}` on `{name}`, a {ndim}-D AtomicSlice, takes {form} as its "
            f"index, found {got} ind{'ex' if got == 1 else 'ices'}",
            loc,
            label=f"expected {ndim} ind{'ex' if ndim == 1 else 'ices'}",
            help=f"write `{example}`"
            + (", or pass `t` with `t = simt.thread.index_2d()`" if ndim == 2 else ""),
        )
    items = x if isinstance(x, tuple) else (x,)
    return [int_index(lw, v, name, loc) for v in items]


def _value(lw: SsaLowerer, call: Call, arr: Value, i: int, kind: str) -> Value:
    """Argument `i` as a value of the array's element type (weak literals adopt it)."""
    assert isinstance(arr.type, ArrayType)
    dt = arr.type.dtype
    x = call.args[i]
    loc = call.arg_loc(i)
    if is_thread_index(x) or is_thread_index_2d(x):
        raise SafetyError(
            "a ThreadIndex cannot be stored into an array",
            loc,
            code="E0602",
            help="store its plain value instead: `int(i)`",
        )
    em = lw.em
    v = em.scalar(x, loc, "value")
    adopted = isinstance(v, Value) and em.is_weak(v) and em.adopts(v, dt)
    if isinstance(v, Value) and v.dtype != dt and not adopted:
        raise KernelTypeError(
            f"mismatched types: `simt.atomic.{kind}` on `{arr.name}` takes {dt.name} values, "
            f"found {v.dtype.name}",
            loc,
            label=f"expected {dt.name}, found {v.dtype.name}",
            help=f"convert the value: `fl.{dt.name}(...)`",
        )
    return em.as_value(v, loc, dt)
