"""SIMT atomics -> LLVM: `atomic.rmw` and `atomic.cas` as `atomicrmw` / `cmpxchg`.

Every atomic is relaxed (`monotonic`) at device scope (`syncscope("device")`), which is what
CUDA's `atomicAdd` and its siblings are: PTX `atom.global.<op>` (`.gpu` scope). The handlers
are registered with `registry.lowers` and run on `lower.py`'s `_KernelLowering` (the
`Lowering` protocol below names what they use).

    atomic.rmw {kind='add'} %a, %i, %v : i32  ->  atomicrmw add ptr %p, i32 %v syncscope("device") monotonic

  ints      add, sub, max/min (signed) or umax/umin (unsigned), xchg, and/or/xor, and numba's
            wrapping counters inc/dec as `uinc_wrap`/`udec_wrap`: PTX `atom.inc/dec.u32` on
            u32; on u64, which PTX lacks, NVPTX's AtomicExpand emits a compare-and-swap loop
  2-D       the element (r, c) of a 2-D AtomicSlice is at r * shape[1] + c (`_element`)
  floats    add as `fadd` (f16, bf16, f32, f64), sub as `fadd` of the negation, exch as `xchg`
            of the bits; max/min as a compare-and-swap loop over the bits computing
            `math.fmax`/`fmin` (old, value) exactly as `arith.py` does, so that a NaN value
            loses and the result is what the simulator computes. The loop stops without a
            write when the element would not change.
  cas       `cmpxchg` on the bits (floats bitcast to integers of their width: bit equality).

The old value each returns is the element before this thread's update.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from llvmlite import ir

from ...dtypes import DType
from ...errors import InternalError
from ...ir.core import ArrayType, Value
from ...ir.simt import ops
from .arith import ScalarEmitter
from .registry import lowers

ORDERING = "monotonic"
SCOPE = 'syncscope("device")'


class Lowering(Protocol):
    """What the atomics need of `lower._KernelLowering`."""

    builder: ir.IRBuilder
    kernel: ir.Function
    scalar: ScalarEmitter

    def _v(self, value: Value) -> ir.Value: ...

    def _set(self, result: Value, lowered: ir.Value) -> None: ...

    def _element(self, array: Value, indices: Sequence[Value]) -> tuple[ir.Value, ir.Type, int]: ...


class _ScopedRMW(ir.instructions.AtomicRMW):  # type: ignore[misc]
    """`atomicrmw` with a sync scope (llvmlite prints none)."""

    def descr(self, buf: list[str]) -> None:
        ptr, val = self.operands
        buf.append(
            f"atomicrmw {self.operation} {ptr.type} {ptr.get_reference()}, {val.type} "
            f"{val.get_reference()} {SCOPE} {self.ordering}\n"
        )


class _ScopedCmpXchg(ir.instructions.CmpXchg):  # type: ignore[misc]
    """`cmpxchg` with a sync scope (llvmlite prints none)."""

    def descr(self, buf: list[str]) -> None:
        ptr, cmp, val = self.operands
        buf.append(
            f"cmpxchg {ptr.type} {ptr.get_reference()}, {cmp.type} {cmp.get_reference()}, "
            f"{val.type} {val.get_reference()} {SCOPE} {self.ordering} {self.failordering}\n"
        )


def _rmw(b: ir.IRBuilder, op: str, ptr: ir.Value, val: ir.Value) -> ir.Value:
    instr = _ScopedRMW(b.block, op, ptr, val, ORDERING, "")
    b._insert(instr)
    return instr


def _cmpxchg(b: ir.IRBuilder, ptr: ir.Value, cmp: ir.Value, val: ir.Value) -> ir.Value:
    instr = _ScopedCmpXchg(b.block, ptr, cmp, val, ORDERING, ORDERING, "")
    b._insert(instr)
    return instr


def _dtype(op: ops.Op) -> DType:
    t = op.operands[0].type
    if not (isinstance(t, ArrayType) and ops.atomic_target(t)):
        raise InternalError(f"`{op.opname}` on {t}, not an AtomicSlice or shared ({op.loc})")
    return t.dtype


def _bits(dtype: DType) -> ir.IntType:
    return ir.IntType(dtype.bits)


_INT_OPS = {
    "add": "add", "sub": "sub", "exch": "xchg", "and_": "and", "or_": "or", "xor": "xor",
    "inc": "uinc_wrap", "dec": "udec_wrap",
}  # fmt: skip


@lowers(ops.AtomicRMW)
def lower_rmw(kl: Lowering, op: ops.AtomicRMW) -> None:
    b = kl.builder
    dtype = _dtype(op)
    ptr, ty, _ = kl._element(op.operands[0], op.indices)
    val = kl._v(op.operands[-1])
    kind = op.kind
    if dtype.is_int:
        name = _INT_OPS.get(kind) or (kind if dtype.is_signed else f"u{kind}")
        old = _rmw(b, name, ptr, val)
    elif kind in ("add", "sub"):
        old = _rmw(b, "fadd", ptr, val if kind == "add" else b.fneg(val))
    elif kind == "exch":
        bits = _bits(dtype)
        old = b.bitcast(_rmw(b, "xchg", ptr, b.bitcast(val, bits)), ty)
    else:
        old = _float_minmax_loop(kl, "fmax" if kind == "max" else "fmin", dtype, ptr, val)
    kl._set(op.result, old)


def _float_minmax_loop(
    kl: Lowering, fn: str, dtype: DType, ptr: ir.Value, val: ir.Value
) -> ir.Value:
    """`fn(old, val)` stored by compare-and-swap until no other thread got in between."""
    b = kl.builder
    bits = _bits(dtype)
    first = b.load_atomic(ptr, ORDERING, dtype.itemsize, typ=bits)
    entry = b.block
    loop = kl.kernel.append_basic_block("atomic.loop")
    attempt = kl.kernel.append_basic_block("atomic.cas")
    done = kl.kernel.append_basic_block("atomic.done")
    b.branch(loop)
    b.position_at_end(loop)
    cur = b.phi(bits, name="atomic.cur")
    cur.add_incoming(first, entry)
    float_type = val.type
    new = kl.scalar.math(fn, dtype, [b.bitcast(cur, float_type), val])
    new_bits = b.bitcast(new, bits)
    b.cbranch(b.icmp_unsigned("==", new_bits, cur), done, attempt)
    b.position_at_end(attempt)
    pair = _cmpxchg(b, ptr, cur, new_bits)
    cur.add_incoming(b.extract_value(pair, 0), attempt)
    b.cbranch(b.extract_value(pair, 1), done, loop)
    b.position_at_end(done)
    return b.bitcast(cur, float_type)


@lowers(ops.AtomicCAS)
def lower_cas(kl: Lowering, op: ops.AtomicCAS) -> None:
    b = kl.builder
    dtype = _dtype(op)
    ptr, ty, _ = kl._element(op.operands[0], op.indices)
    expected, val = kl._v(op.operands[-2]), kl._v(op.operands[-1])
    if dtype.is_float:
        bits = _bits(dtype)
        pair = _cmpxchg(b, ptr, b.bitcast(expected, bits), b.bitcast(val, bits))
        old: Any = b.bitcast(b.extract_value(pair, 0), ty)
    else:
        old = b.extract_value(_cmpxchg(b, ptr, expected, val), 0)
    kl._set(op.result, old)
