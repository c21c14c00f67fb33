"""SIMT warp and block collectives -> LLVM (NVVM `shfl.sync`, `vote.sync`, `redux.sync`).

The handlers are registered with `registry.lowers` and run on `lower.py`'s
`_KernelLowering` (`lw`). `sim/collectives.py` computes the same steps in NumPy.

Warps are runs of 32 threads in the block's linear order (t = tid.x + ntid.x * (tid.y +
ntid.y * tid.z), lane t & 31, warp t >> 5). The member mask of warp w is its threads: all 32,
or the first n = ntid - 32 w of a partial last warp. A shuffle whose source lane is not below n
gives the thread its own value (`select`), so a partial warp is a warp of only its threads.

    warp.shfl {mode}   shfl.sync.idx (lane b & 31) / .down (lane + b) / .bfly (lane ^ b); 64-bit
                       values move as two 32-bit halves
    warp.vote {kind}   vote.sync.all / .any (i1) / .ballot (i32)
    warp.reduce        redux.sync for i32/u32 (sm_80+: add, min/max, umin/umax); other types a
                       shfl.down tree (offsets 16, 8, 4, 2, 1, a missing lane is the identity),
                       then lane 0's total to every lane (shfl.idx 0)
    block.reduce       the tree per warp; lane 0 stores its warp's total in a hidden shared buffer;
                       barrier; every warp reduces the totals with the same tree and hands lane
                       0's result to its lanes (shfl.idx); a barrier (the buffer is free) only
                       when the op stands in a loop
    block.scan         a shfl.up scan per warp (offsets 1 .. 16); the warp's last thread stores the
                       warp's total; barrier; warp 0 scans the totals and stores the prefixes at
                       32 + w; barrier; thread of warp w > 0: op(prefix[w - 1], own); barrier
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ...dtypes import DType
from ...ir.core import ScalarType
from ...ir.simt import ops
from .registry import lowers
from .shared import SHARED_ADDRSPACE, emit_barrier
from .types import I1, I32, I64, constant, scalar_type

_KIND = {"sum": "add", "max": "max", "min": "min"}
_SHFL_MODE = {"idx": "idx", "down": "down", "xor": "bfly", "up": "up"}


@dataclass(frozen=True)
class _Warp:
    lane: ir.Value  # i32
    warp: ir.Value  # i32
    n: ir.Value  # threads in this warp (i32)
    mask: ir.Value  # their member mask (i32)
    n_warps: ir.Value  # warps in the block (i32)


def _geometry(lw: Any) -> _Warp:
    b = lw.builder
    tx, ty, tz, nx, ny, nz = (
        lw.support.sreg(b, r) for r in ("tid.x", "tid.y", "tid.z", "ntid.x", "ntid.y", "ntid.z")
    )
    flags = ("nuw", "nsw")
    t = b.add(tx, b.mul(nx, b.add(ty, b.mul(ny, tz, flags=flags), flags=flags), flags=flags))
    size = b.mul(b.mul(nx, ny, flags=flags), nz, flags=flags)
    lane = b.and_(t, ir.Constant(I32, 31), name="lane")
    warp = b.lshr(t, ir.Constant(I32, 5), name="warp")
    left = b.sub(size, b.shl(warp, ir.Constant(I32, 5)))
    full = b.icmp_unsigned(">=", left, ir.Constant(I32, 32))
    n = b.select(full, ir.Constant(I32, 32), left)
    partial = b.sub(b.shl(ir.Constant(I32, 1), n), ir.Constant(I32, 1))
    mask = b.select(full, ir.Constant(I32, -1), partial, name="members")
    n_warps = b.lshr(b.add(size, ir.Constant(I32, 31)), ir.Constant(I32, 5))
    return _Warp(lane, warp, n, mask, n_warps)


def _raw_shfl(lw: Any, mode: str, value: ir.Value, dt: DType, b_: ir.Value, g: _Warp) -> ir.Value:
    """`shfl.sync.<mode>` of a 32- or 64-bit value (no own-value fix-up)."""
    bld = lw.builder
    c = ir.Constant(I32, 0 if mode == "up" else 0x1F)
    name = _SHFL_MODE[mode]
    if dt.bits == 32:
        kind = "f32" if dt.is_float else "i32"
        ty = ir.FloatType() if dt.is_float else I32
        fn = lw.support.intrinsic(f"llvm.nvvm.shfl.sync.{name}.{kind}", ty, [I32, ty, I32, I32])
        fn.attributes.add("convergent")
        return bld.call(fn, [g.mask, value, b_, c])
    bits = bld.bitcast(value, I64) if dt.is_float else value
    fn = lw.support.intrinsic(f"llvm.nvvm.shfl.sync.{name}.i32", I32, [I32, I32, I32, I32])
    fn.attributes.add("convergent")
    lo = bld.call(fn, [g.mask, bld.trunc(bits, I32), b_, c])
    hi = bld.call(fn, [g.mask, bld.trunc(bld.lshr(bits, ir.Constant(I64, 32)), I32), b_, c])
    joined = bld.or_(bld.zext(lo, I64), bld.shl(bld.zext(hi, I64), ir.Constant(I64, 32)))
    return bld.bitcast(joined, scalar_type(dt)) if dt.is_float else joined


def _dtype(op: ops.Op) -> DType:
    t = op.operands[0].type
    assert isinstance(t, ScalarType)
    return t.dtype


@lowers(ops.WarpShuffle)
def lower_shuffle(lw: Any, op: ops.WarpShuffle) -> None:
    bld = lw.builder
    dt, g, mode = _dtype(op), _geometry(lw), op.attrs["mode"]
    own, b_ = lw._v(op.operands[0]), lw._v(op.operands[1])
    if mode == "idx":
        src = bld.and_(b_, ir.Constant(I32, 31))
        valid = bld.icmp_unsigned("<", src, g.n)
        moved = _raw_shfl(lw, "idx", own, dt, src, g)
    else:
        if mode == "down":
            src = bld.add(g.lane, b_)
            in_warp = bld.icmp_unsigned("<", b_, ir.Constant(I32, 32))
            valid = bld.and_(in_warp, bld.icmp_unsigned("<", src, g.n))
        else:
            valid = bld.icmp_unsigned("<", bld.xor(g.lane, b_), g.n)
        moved = _raw_shfl(lw, mode, own, dt, b_, g)
    lw._set(op.result, bld.select(valid, moved, own))


@lowers(ops.WarpVote)
def lower_vote(lw: Any, op: ops.WarpVote) -> None:
    g, kind = _geometry(lw), op.attrs["kind"]
    ret = I32 if kind == "ballot" else I1
    fn = lw.support.intrinsic(f"llvm.nvvm.vote.{kind}.sync", ret, [I32, I1])
    fn.attributes.add("convergent")
    lw._set(op.result, lw.builder.call(fn, [g.mask, lw._v(op.operands[0])]))


def _identity(name: str, dt: DType) -> ir.Constant:
    if dt.is_float:
        return constant(dt, {"sum": -0.0, "max": float("-inf"), "min": float("inf")}[name])
    lo, hi = (
        (-(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1)
        if dt.is_signed
        else (0, (1 << dt.bits) - 1)
    )
    return constant(dt, {"sum": 0, "max": lo, "min": hi}[name])


def _tree(lw: Any, v: ir.Value, dt: DType, name: str, g: _Warp) -> ir.Value:
    """Lane 0 ends with the warp's total: v = op(v, lane + off's v or the identity)."""
    bld = lw.builder
    ident = _identity(name, dt)
    for off in (16, 8, 4, 2, 1):
        k = ir.Constant(I32, off)
        other = _raw_shfl(lw, "down", v, dt, k, g)
        other = bld.select(bld.icmp_unsigned("<", bld.add(g.lane, k), g.n), other, ident)
        v = lw.scalar.binary(_KIND[name], dt, v, other)
    return v


def _scan(lw: Any, v: ir.Value, dt: DType, name: str, g: _Warp) -> ir.Value:
    """Lane l ends with op over lanes 0..l: v = op(lane - off's v, v) for lanes l >= off."""
    bld = lw.builder
    for off in (1, 2, 4, 8, 16):
        k = ir.Constant(I32, off)
        before = _raw_shfl(lw, "up", v, dt, k, g)
        combined = lw.scalar.binary(_KIND[name], dt, before, v)
        v = bld.select(bld.icmp_unsigned(">=", g.lane, k), combined, v)
    return v


@lowers(ops.WarpReduce)
def lower_warp_reduce(lw: Any, op: ops.WarpReduce) -> None:
    dt, g, name = _dtype(op), _geometry(lw), op.attrs["op"]
    v = lw._v(op.operands[0])
    if dt.name in ("i32", "u32"):
        which = {"sum": "add", "max": "max", "min": "min"}[name]
        if dt.name == "u32" and name != "sum":
            which = "u" + which
        fn = lw.support.intrinsic(f"llvm.nvvm.redux.sync.{which}", I32, [I32, I32])
        fn.attributes.add("convergent")
        lw._set(op.result, lw.builder.call(fn, [v, g.mask]))
        return
    total = _tree(lw, v, dt, name, g)
    lw._set(op.result, _raw_shfl(lw, "idx", total, dt, ir.Constant(I32, 0), g))


def _buffer(lw: Any, dt: DType) -> tuple[ir.Value, ir.Type]:
    """A hidden shared buffer of 64 elements for one block collective."""
    ty = scalar_type(dt)
    name = f"__shared_collective_{len(lw.module.globals)}"
    buf = ir.GlobalVariable(lw.module, ir.ArrayType(ty, 64), name, addrspace=SHARED_ADDRSPACE)
    buf.linkage = "internal"
    buf.initializer = ir.Constant(buf.value_type, ir.Undefined)
    buf.align = 16
    return buf, ty


def _slot(lw: Any, buf: ir.Value, i: ir.Value) -> ir.Value:
    return lw.builder.gep(buf, [ir.Constant(I64, 0), lw.builder.zext(i, I64)], inbounds=True)


@lowers(ops.BlockReduce)
def lower_block_reduce(lw: Any, op: ops.BlockReduce) -> None:
    """Each warp's tree; lane 0 stores its warp's total; one barrier; then every warp reduces
    the totals with the same tree (so lane 0's result is the simulator's, bit for bit) and
    hands it to its lanes (shfl.idx 0). A barrier after the reads keeps the buffer from being
    overwritten by the next run of the op, needed only when the op stands in a loop."""
    dt, g, name = _dtype(op), _geometry(lw), op.attrs["op"]
    bld = lw.builder
    buf, ty = _buffer(lw, dt)
    zero = ir.Constant(I32, 0)
    total = _tree(lw, lw._v(op.operands[0]), dt, name, g)
    with bld.if_then(bld.icmp_unsigned("==", g.lane, zero)):
        bld.store(total, _slot(lw, buf, g.warp))
    emit_barrier(lw)
    first = bld.icmp_unsigned("<", g.lane, g.n_warps)
    loaded = bld.load(_slot(lw, buf, bld.select(first, g.lane, zero)), typ=ty)
    result = _tree(lw, bld.select(first, loaded, _identity(name, dt)), dt, name, g)
    out = _raw_shfl(lw, "idx", result, dt, zero, g)
    if op.block in lw.loops.cyclic:  # the op may run again: its buffer must be free first
        emit_barrier(lw)
    lw._set(op.result, out)


@lowers(ops.BlockScan)
def lower_block_scan(lw: Any, op: ops.BlockScan) -> None:
    dt, g, name = _dtype(op), _geometry(lw), op.attrs["op"]
    bld = lw.builder
    buf, ty = _buffer(lw, dt)
    zero, one, k32 = (ir.Constant(I32, k) for k in (0, 1, 32))
    own = _scan(lw, lw._v(op.operands[0]), dt, name, g)
    with bld.if_then(bld.icmp_unsigned("==", g.lane, bld.sub(g.n, one))):
        bld.store(own, _slot(lw, buf, g.warp))
    emit_barrier(lw)
    with bld.if_then(bld.icmp_unsigned("==", g.warp, zero)):
        first = bld.icmp_unsigned("<", g.lane, g.n_warps)
        loaded = bld.load(_slot(lw, buf, bld.select(first, g.lane, zero)), typ=ty)
        prefix = _scan(lw, bld.select(first, loaded, _identity(name, dt)), dt, name, g)
        with bld.if_then(first):
            bld.store(prefix, _slot(lw, buf, bld.add(k32, g.lane)))
    emit_barrier(lw)
    later = bld.icmp_unsigned(">", g.warp, zero)
    prev_slot = bld.select(later, bld.add(bld.sub(k32, one), g.warp), k32)
    prev = bld.load(_slot(lw, buf, prev_slot), typ=ty)
    combined = lw.scalar.binary(_KIND[name], dt, prev, own)
    emit_barrier(lw)
    lw._set(op.result, bld.select(later, combined, own))
