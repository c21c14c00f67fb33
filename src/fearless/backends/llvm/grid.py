"""SIMT grid sync -> LLVM: `grid.sync`, the grid-wide barrier of a cooperative kernel.

PTX has no grid barrier instruction; this is the algorithm of CUDA's cooperative groups
(`grid.sync()`), on a u32 counter in global memory that the runtime zeroes before each launch
and passes as the hidden parameter after the error record (`abi.py`, `%grid_bar`):

    bar.sync 0                                  every thread of the block is here
    if thread (0, 0, 0) of the block:
        nb = block (0, 0, 0) ? 0x80000000 - (blocks - 1) : 1
        membar.gl                               this block's writes before the sync
        old = atom.global.add.u32 [grid_bar], nb
        spin: ld.volatile.global.u32 until its bit 31 differs from old's
              (or the error record's flag is set: a thread failed a check, and its block
              may never arrive)
        membar.gl                               the other blocks' writes, after
    bar.sync 0
    if the error record's flag is set: return   (every thread: the launch has failed)

The blocks' additions sum to exactly 0x80000000 per sync: the low 31 bits come back to where
they were and bit 31 flips, so the counter serves every sync of the launch without a reset
(the generation bit). Loads and fences are inline PTX with a memory clobber, so LLVM moves no
memory access across the sync; `lower.py` drops `noalias` from a cooperative kernel's
writable arrays, whose elements other threads write between syncs.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...ir.simt import ops
from .registry import lowers
from .shared import emit_barrier
from .types import I32, I64, VOID

_FLIP = 0x80000000


def _asm(b: ir.IRBuilder, ret: ir.Type, text: str, constraint: str, args: list[ir.Value]) -> Any:
    fn = ir.InlineAsm(ir.FunctionType(ret, [a.type for a in args]), text, constraint, True)
    return b.call(fn, args)


def _fence(b: ir.IRBuilder) -> None:
    _asm(b, VOID, "membar.gl;", "~{memory}", [])


def _volatile_u32(b: ir.IRBuilder, ptr: ir.Value) -> ir.Value:
    return _asm(
        b, I32, "ld.volatile.global.u32 $0, [$1];", "=r,l,~{memory}", [b.ptrtoint(ptr, I64)]
    )


def _failed(b: ir.IRBuilder, err: ir.Value) -> ir.Value:
    """Whether the error record's flag (word 0) is set: a thread of the launch failed."""
    flag = _asm(
        b, I64, "ld.volatile.global.u64 $0, [$1];", "=l,l,~{memory}", [b.ptrtoint(err, I64)]
    )
    return b.icmp_unsigned("!=", flag, ir.Constant(I64, 0), name="failed")


def _all_zero(lw: Any, regs: tuple[str, ...]) -> ir.Value:
    b = lw.builder
    acc = lw.support.sreg(b, regs[0])
    for r in regs[1:]:
        acc = b.or_(acc, lw.support.sreg(b, r))
    return b.icmp_unsigned("==", acc, ir.Constant(I32, 0))


def array_attributes(shared_between_syncs: bool) -> tuple[str, ...]:
    """An array parameter's LLVM attributes: `noalias` (the borrow check proved no other
    argument overlaps it), except for a cooperative kernel's writable arrays, whose elements
    other threads write between grid syncs and this thread reads after one."""
    if shared_between_syncs:
        return ("noundef",)
    return ("noalias", "noundef", "captures(none)")


@lowers(ops.GridSync)
def lower_grid_sync(lw: Any, op: ops.GridSync) -> None:
    b: ir.IRBuilder = lw.builder
    counter, err = lw.grid_barrier, lw.err
    counter.name = "grid_bar"
    k = lw.kernel
    arrive, spin, waiting, arrived, after, leave, go = (
        k.append_basic_block(f"grid_{n}")
        for n in ("arrive", "spin", "wait", "arrived", "after", "failed", "go")
    )
    emit_barrier(lw)
    b.cbranch(_all_zero(lw, ("tid.x", "tid.y", "tid.z")), arrive, after)

    b.position_at_end(arrive)
    master = _all_zero(lw, ("ctaid.x", "ctaid.y", "ctaid.z"))
    nx, ny, nz = (lw.support.sreg(b, f"nctaid.{a}") for a in "xyz")
    blocks = b.mul(b.mul(nx, ny), nz, name="blocks")
    first = b.sub(ir.Constant(I32, _FLIP + 1), blocks)  # 0x80000000 - (blocks - 1)
    nb = b.select(master, first, ir.Constant(I32, 1), name="nb")
    _fence(b)
    old = b.atomic_rmw("add", counter, nb, "monotonic", name="old")
    b.branch(spin)

    b.position_at_end(spin)
    now = _volatile_u32(b, counter)
    flipped = b.icmp_unsigned(
        "!=", b.and_(b.xor(old, now), ir.Constant(I32, _FLIP)), ir.Constant(I32, 0)
    )
    b.cbranch(flipped, arrived, waiting)

    b.position_at_end(waiting)
    b.cbranch(_failed(b, err), arrived, spin)

    b.position_at_end(arrived)
    _fence(b)
    b.branch(after)

    b.position_at_end(after)
    emit_barrier(lw)
    b.cbranch(_failed(b, err), leave, go)

    b.position_at_end(leave)
    lw._leave()
    b.position_at_end(go)
