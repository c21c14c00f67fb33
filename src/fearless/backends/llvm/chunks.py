"""SIMT chunk copies -> LLVM: the W loads or stores marked `vector=(j, W)` as one vector access.

A chunk copy (simt/chunks.py, ir/simt/chunk_groups.py) is W scalar accesses of one array at
columns c + W-1, ..., c + 1, c, each after its own bounds check. Lowering waits for lane 0, the
group's last access, when every lane's check has run, and then moves the whole chunk:

    %a = ptrtoint ptr %p to i64                      ; %p: the lane-0 element
    br (%a & (W * size - 1)) == 0, %vector, %scalar
  vector:  load <W x T>, ptr %p, align W * size      ; ld.global.nc.v4.f32 for W = 4, f32
  scalar:  W loads of T at %p + j                    ; a row that starts unaligned
  join:    a phi per lane

Stores are the same, with the lanes' values gathered first (a `store <W x T>` stays one
`st.global.v4`). The vector load is inline PTX (`_vector_load` says why). The meaning is the W
scalar accesses'; only their number of instructions changes.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...errors import InternalError
from ...ir.simt import ops
from .types import I64


def lower_load(lw: Any, op: ops.Load) -> bool:
    """Handle a load of a chunk copy (True), or leave a plain load to the caller (False)."""
    group = _collect(lw, op)
    if group is None:
        return op.vector is not None  # a lane before 0: its result comes with lane 0
    ptr, ty, size = lw._element(op.operands[0], op.indices)
    width = len(group)
    b = lw.builder
    readonly = lw._array(op.operands[0]).readonly
    aligned = _aligned(b, ptr, width * size)
    with b.if_else(aligned) as (then, otherwise):
        with then:
            words = _vector_load(b, ptr, width * size, readonly)
            whole = b.bitcast(words, ir.VectorType(ty, width))
            from_vector = [
                b.extract_element(whole, ir.Constant(ir.IntType(32), j)) for j in range(width)
            ]
            vector_block = b.block
        with otherwise:
            from_scalars = []
            for j in range(width):
                lane_ptr = b.gep(ptr, [ir.Constant(I64, j)], inbounds=True, source_etype=ty)
                one = b.load(lane_ptr, typ=ty, align=size)
                _invariant(lw, one, readonly)
                from_scalars.append(one)
            scalar_block = b.block
    for member in group:
        lane = member.vector[0]  # type: ignore[index]
        phi = b.phi(ty, name=f"lane{lane}")
        phi.add_incoming(from_vector[lane], vector_block)
        phi.add_incoming(from_scalars[lane], scalar_block)
        lw._set(member.result, phi)
    return True


def lower_store(lw: Any, op: ops.Store) -> bool:
    """Handle a store of a chunk copy (True), or leave a plain store to the caller (False)."""
    group = _collect(lw, op)
    if group is None:
        return op.vector is not None  # written with lane 0
    ptr, ty, size = lw._element(op.operands[0], op.indices)
    width = len(group)
    values: list[Any] = [None] * width
    for member in group:
        values[member.vector[0]] = lw._v(member.operands[-1])  # type: ignore[index]
    b = lw.builder
    aligned = _aligned(b, ptr, width * size)
    with b.if_else(aligned) as (then, otherwise):
        with then:
            whole: ir.Value = ir.Constant(ir.VectorType(ty, width), ir.Undefined)
            for j, v in enumerate(values):
                whole = b.insert_element(whole, v, ir.Constant(ir.IntType(32), j))
            b.store(whole, ptr, align=width * size)
        with otherwise:
            for j, v in enumerate(values):
                lane_ptr = b.gep(ptr, [ir.Constant(I64, j)], inbounds=True, source_etype=ty)
                b.store(v, lane_ptr, align=size)
    return True


def _collect(lw: Any, op: ops.Load | ops.Store) -> list[Any] | None:
    """The whole group once `op` is its lane 0 (lanes W-1 .. 0, as ir/simt/chunk_groups.py
    verifies); None before, keeping `op` for later, and for an access of no chunk copy."""
    vec = op.vector
    if vec is None:
        return None
    pending: list[Any] = lw.chunk_pending
    pending.append(op)
    if vec[0] != 0:
        return None
    if len(pending) != vec[1]:
        raise InternalError(f"a chunk copy of {vec[1]} lanes has {len(pending)} ({op.loc})")
    lw.chunk_pending = []
    return pending


def _vector_load(b: ir.IRBuilder, ptr: ir.Value, nbytes: int, readonly: bool) -> ir.Value:
    """`nbytes` (4, 8 or 16) at the aligned `ptr` in one PTX access, as a vector of 32-bit words.

    Inline PTX: LLVM turns a `load <4 x float>` whose lanes are only extracted back into four
    scalar loads, and then, the two sides of the alignment test being alike, drops the test and
    the alignment with it. A Slice is read on the non-coherent path (`.nc`, as its scalar loads
    with `!invariant.load`); another array's read is ordered with the kernel's stores (a
    memory clobber)."""
    words = nbytes // 4
    i32 = ir.IntType(32)
    space = "ld.global.nc" if readonly else "ld.global"
    if words == 1:
        asm, ret = f"{space}.b32 $0, [$1];", i32
    else:
        outs = ", ".join(f"${j}" for j in range(words))
        asm = f"{space}.v{words}.b32 {{{outs}}}, [${words}];"
        ret = ir.LiteralStructType([i32] * words)
    constraint = ",".join(["=r"] * words + ["l"] + ([] if readonly else ["~{memory}"]))
    fn = ir.InlineAsm(ir.FunctionType(ret, [I64]), asm, constraint, side_effect=not readonly)
    raw = b.call(fn, [b.ptrtoint(ptr, I64)])
    vector: ir.Value = ir.Constant(ir.VectorType(i32, words), ir.Undefined)
    for j in range(words):
        word = raw if words == 1 else b.extract_value(raw, j)
        vector = b.insert_element(vector, word, ir.Constant(i32, j))
    return vector


def _aligned(b: ir.IRBuilder, ptr: ir.Value, nbytes: int) -> ir.Value:
    address = b.ptrtoint(ptr, I64)
    low = b.and_(address, ir.Constant(I64, nbytes - 1))
    return b.icmp_unsigned("==", low, ir.Constant(I64, 0), name="aligned")


def _invariant(lw: Any, load: ir.Instruction, readonly: bool) -> None:
    if readonly:  # as lower.py's loads of a Slice: the non-coherent path
        load.set_metadata("invariant.load", lw.module.add_metadata([]))
