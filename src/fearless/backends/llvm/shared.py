"""SIMT shared memory and barriers -> LLVM: `shared.alloc`, `barrier`, the block indices.

The handlers (registered with `registry.lowers`) run on `lower.py`'s
`_KernelLowering` (`lw`: its builder, module, support and the `arrays` / `values` maps).

    %s = shared.alloc : Shared[f32, 256]
        ->  @__shared_s_0 = internal addrspace(3) global [256 x float] undef, align 16
            (a load or store of %s indexes it as an array parameter: a GEP on the global,
            with the static extents as `len`)
    %v = local.alloc : Local[f32, 8]
        ->  %local = alloca [8 x float], align 16           (in the entry block)
            store [8 x float] zeroinitializer, ptr %local    (zeroed: as the simulator's)
    barrier                  ->  call void @llvm.nvvm.barrier0()       (PTX `bar.sync 0`)
    %t = thread.block_index_2d : BlockIndex2D  ->  (tid.y + ntid.y * tid.z, tid.x), for index.axis
    %j = thread.block_index_1d : BlockIndex
        ->  tid.x + ntid.x * (tid.y + ntid.y * tid.z)  in i64, nuw nsw

`llvm.nvvm.barrier0` is `convergent`, so LLVM never moves it into or out of control flow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ...ir.core import ArrayType, Value
from ...ir.simt import ops
from .registry import lowers
from .types import I64, memory_type

SHARED_ADDRSPACE = 3
VOID = ir.VoidType()


@dataclass(frozen=True)
class SharedArray:
    """A lowered shared (or local) array, shaped as `lower._Array` (pointer, extents,
    read-only)."""

    ptr: ir.Value
    extents: tuple[ir.Value, ...]
    readonly: bool = False


@lowers(ops.SharedAlloc)
def lower_shared_alloc(lw: Any, op: ops.SharedAlloc) -> None:
    name = f"__shared_{op.result.name or 'array'}_{len(lw.module.globals)}"
    storage = _storage(op.result)
    g = ir.GlobalVariable(lw.module, storage, name, addrspace=SHARED_ADDRSPACE)
    g.linkage = "internal"
    g.initializer = ir.Constant(g.value_type, ir.Undefined)
    g.align = 16
    zero = ir.Constant(I64, 0)
    _bind(lw, op.result, g.gep([zero, zero]))


@lowers(ops.LocalAlloc)
def lower_local_alloc(lw: Any, op: ops.LocalAlloc) -> None:
    """An `alloca` in the entry block, zeroed there as the simulator's local arrays are (an
    element read before any write is 0, not undef): SROA keeps it in registers when every
    index is a constant (after LLVM unrolls the loops over it), and the zero store then folds
    into the first writes; an array that lives in local memory (a run-time index) pays one
    zeroing store per 16 bytes at the kernel's start."""
    b = lw.builder
    storage = _storage(op.result)
    with b.goto_entry_block():
        slot = b.alloca(storage, name="local")
        slot.align = 16
        b.store(ir.Constant(storage, None), slot, align=16)
    zero = ir.Constant(I64, 0)
    _bind(lw, op.result, b.gep(slot, [zero, zero]))


def _storage(array: Value) -> ir.ArrayType:
    """The flat [count x element] storage of a shared or local array (row-major)."""
    t = array.type
    assert isinstance(t, ArrayType) and t.static_shape is not None
    return ir.ArrayType(memory_type(t.dtype), math.prod(t.static_shape))


def _bind(lw: Any, array: Value, first: ir.Value) -> None:
    """Record a shared or local array by the address of its element 0: loads and stores GEP
    from it by element, as from a parameter, within its constant extents."""
    t = array.type
    assert isinstance(t, ArrayType) and t.static_shape is not None
    lw.arrays[array] = SharedArray(first, tuple(ir.Constant(I64, d) for d in t.static_shape))


@lowers(ops.Barrier)
def lower_barrier(lw: Any, op: ops.Barrier) -> None:
    emit_barrier(lw)


def emit_barrier(lw: Any) -> None:
    """`bar.sync 0` (also inside the block collectives of `collectives.py`)."""
    fn = lw.support.intrinsic("llvm.nvvm.barrier0", VOID, [])
    fn.attributes.add("convergent")
    fn.attributes.add("nounwind")
    lw.builder.call(fn, [])


@lowers(ops.BlockIndex2D)
def lower_block_index_2d(lw: Any, op: ops.BlockIndex2D) -> None:
    """(tid.y + ntid.y * tid.z, tid.x) in i64; `index.axis` reads them from `lw.index_2d`."""
    b = lw.builder
    tx, ty, tz, ny = (
        b.zext(lw.support.sreg(b, r), I64) for r in ("tid.x", "tid.y", "tid.z", "ntid.y")
    )
    row = b.add(ty, b.mul(ny, tz, flags=("nuw", "nsw")), name="block_row", flags=("nuw", "nsw"))
    lw.index_2d[op.result] = (row, tx)


@lowers(ops.BlockIndex1D)
def lower_block_index(lw: Any, op: ops.BlockIndex1D) -> None:
    """The linear thread position in the block; below 1024, so no product wraps."""
    b = lw.builder
    tx, ty, tz, nx, ny = (
        b.zext(lw.support.sreg(b, r), I64) for r in ("tid.x", "tid.y", "tid.z", "ntid.x", "ntid.y")
    )
    flags = ("nuw", "nsw")
    yz = b.add(ty, b.mul(ny, tz, flags=flags), flags=flags)
    lw._set(op.result, b.add(tx, b.mul(nx, yz, flags=flags), name="slot", flags=flags))


def _block_id(lw: Any) -> ir.Value:
    """ctaid.x + nctaid.x * (ctaid.y + nctaid.y * ctaid.z) in i64: the block's linear index."""
    b = lw.builder
    x, y, z, nx, ny = (
        b.zext(lw.support.sreg(b, r), I64)
        for r in ("ctaid.x", "ctaid.y", "ctaid.z", "nctaid.x", "nctaid.y")
    )
    flags = ("nuw", "nsw")
    yz = b.add(y, b.mul(ny, z, flags=flags), flags=flags)
    return b.add(x, b.mul(nx, yz, flags=flags), name="block_id", flags=flags)


@lowers(ops.BlockId)
def lower_block_id(lw: Any, op: ops.BlockId) -> None:
    """`thread.block_id`: the block's linear index in the grid."""
    lw._set(op.result, _block_id(lw))


@lowers(ops.BlockRowIndex)
def lower_block_row(lw: Any, op: ops.BlockRowIndex) -> None:
    """(ctaid.x + nctaid.x * (ctaid.y + nctaid.y * ctaid.z), the column) in i64: the pair of
    `simt.thread.block_stride`, read by `index.axis` from `lw.index_2d`."""
    b = lw.builder
    flags = ("nuw", "nsw")
    row = _block_id(lw)
    column = lw._v(op.operands[0])
    if op.width > 1:  # `block_column(k, W)`: the first column of the chunk, W * c
        column = b.mul(column, ir.Constant(I64, op.width), name="chunk", flags=flags)
    lw.index_2d[op.result] = (row, column)


def _advance(lw: Any, op: ops.BlockStep | ops.BlockTileRow, name: str) -> ir.Value:
    """t + umin(k, 2^31) * n of a step op's operands (t, k, n): a negative or huge k lands
    past any array."""
    b = lw.builder
    t, k, n = (lw._v(v) for v in op.operands)
    limit = ir.Constant(I64, 1 << 31)
    k = b.select(b.icmp_unsigned("<", k, limit), k, limit)
    flags = ("nuw", "nsw")
    return b.add(t, b.mul(k, n, flags=flags), name=name, flags=flags)


@lowers(ops.BlockStep)
def lower_block_step(lw: Any, op: ops.BlockStep) -> None:
    lw._set(op.result, _advance(lw, op, "column"))


@lowers(ops.BlockTileRow)
def lower_block_tile_row(lw: Any, op: ops.BlockTileRow) -> None:
    """(r + umin(k, 2^31) * R, tid.x): `block_index_2d(k)`, read by `index.axis`."""
    col = lw.builder.zext(lw.support.sreg(lw.builder, "tid.x"), I64)
    lw.index_2d[op.result] = (_advance(lw, op, "tile_row"), col)


@lowers(ops.TileRow)
def lower_tile_row(lw: Any, op: ops.TileRow) -> None:
    """(l < rows ? by * rows + l : 2^62, ctaid.x * ntid.x + tid.x): `tile_index_2d`."""
    b = lw.builder
    local, rows, by = (lw._v(v) for v in op.operands)
    flags = ("nuw", "nsw")
    inside = b.add(b.mul(by, rows, flags=flags), local, flags=flags)
    past = ir.Constant(I64, ops.TILE_ROW_PAST)
    row = b.select(b.icmp_unsigned("<", local, rows), inside, past, name="row")
    x, nx, tx = (b.zext(lw.support.sreg(b, r), I64) for r in ("ctaid.x", "ntid.x", "tid.x"))
    col = b.add(b.mul(x, nx, flags=flags), tx, name="col", flags=flags)
    lw.index_2d[op.result] = (row, col)
