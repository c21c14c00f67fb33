"""Structural checks on a function; run after every pass under pytest (FEARLESS_VERIFY=1).

Checks: every block ends in exactly one terminator; branch arguments match the target's
arguments in number and type; every operand is defined by an op or block argument that
dominates its use; op-specific typing rules (operands of one type, one i64 index per axis of
the array; an atomic's array is an AtomicSlice and its values of the element type, ...); a
ThreadIndex2D is never a block argument; `index.advance` steps a ThreadIndex by the grid's
thread count and a BlockIndex by the block's, computed from the special registers.
"""

from __future__ import annotations

from ... import dtypes
from ...errors import InternalError
from ..analysis import dominators
from ..core import (
    BLOCK_INDEX,
    THREAD_INDEX,
    ArrayType,
    Block,
    Function,
    Op,
    ScalarType,
    ThreadIndex2DType,
    Value,
)
from . import chunk_groups, ops


def _fail(fn: Function, msg: str, op: Op | None = None) -> InternalError:
    where = f" (op {op.opname} from {op.loc})" if op is not None else ""
    return InternalError(f"IR verification failed in @{fn.name}: {msg}{where}")


def verify(fn: Function) -> None:
    if not fn.blocks:
        raise _fail(fn, "no blocks")
    reachable = fn.reverse_postorder()
    doms = dominators(fn)
    defined_in: dict[Value, tuple[Block, int]] = {}
    for b in fn.blocks:
        for a in b.args:
            defined_in[a] = (b, -1)
            if isinstance(a.type, ThreadIndex2DType):
                raise _fail(fn, f"block argument {a!r} is a ThreadIndex2D")
        for i, op in enumerate(b.ops):
            for r in op.results:
                defined_in[r] = (b, i)
    for b in reachable:
        if not b.ops or not b.ops[-1].is_terminator:
            raise _fail(fn, f"block ^bb{b.id} has no terminator")
        for i, op in enumerate(b.ops):
            if op.is_terminator and i != len(b.ops) - 1:
                raise _fail(fn, f"terminator in the middle of ^bb{b.id}", op)
            if op.block is not b:
                raise _fail(fn, "op's block pointer is stale", op)
            for v in op.operands:
                if v not in defined_in:
                    raise _fail(fn, f"operand {v!r} is defined nowhere", op)
                db, di = defined_in[v]
                if db is b:
                    if di >= i:
                        raise _fail(fn, f"operand {v!r} used before its definition", op)
                elif db not in doms.get(b, set()):
                    raise _fail(fn, f"operand {v!r} does not dominate its use", op)
            _check_types(fn, op)
        for group in chunk_groups.groups(b):
            if isinstance(group, str):
                raise _fail(fn, f"{group} in ^bb{b.id}")
        term = b.ops[-1]
        for s in term.successors():
            args = ops.branch_args(term, s)
            if len(args) != len(s.args):
                raise _fail(fn, f"branch passes {len(args)} values to ^bb{s.id}", term)
            for a, p in zip(args, s.args, strict=True):
                if a.type != p.type:
                    raise _fail(fn, f"branch passes {a.type} to an argument of {p.type}", term)


def _check_types(fn: Function, op: Op) -> None:
    ok = True
    if isinstance(op, ops.Binary | ops.Compare):
        ok = op.operands[0].type == op.operands[1].type and isinstance(
            op.operands[0].type, ScalarType
        )
    elif isinstance(op, ops.Select):
        ok = op.operands[1].type == op.operands[2].type
    elif isinstance(op, ops.Load | ops.Store):
        arr = op.operands[0].type
        idx = op.indices
        ok = (
            isinstance(arr, ArrayType)
            and len(idx) == arr.ndim
            and all(i.type == ops.I64 for i in idx)
        )
        if isinstance(op, ops.Store) and isinstance(arr, ArrayType):
            ok = ok and op.operands[-1].type == ScalarType(arr.dtype) and arr.const is None
    elif isinstance(op, ops.AtomicRMW | ops.AtomicCAS):
        arr = op.operands[0].type
        n_values = 1 if isinstance(op, ops.AtomicRMW) else 2
        ok = (
            isinstance(arr, ArrayType)
            and ops.atomic_target(arr)
            and len(op.operands) == 1 + arr.ndim + n_values
            and all(i.type == ops.I64 for i in op.indices)
            and all(v.type == ScalarType(arr.dtype) for v in op.operands[1 + arr.ndim :])
        )
    elif isinstance(op, ops.BoundsCheck):
        ok = len(op.operands) == 2 * len(op.sites) and all(v.type == ops.I64 for v in op.operands)
    elif isinstance(op, ops.ArrayLen):
        arr = op.operands[0].type
        ok = isinstance(arr, ArrayType) and 0 <= op.axis < arr.ndim
    elif isinstance(op, ops.WarpShuffle):
        ok = op.operands[1].type == ScalarType(dtypes.i32) and _collective_type(op.operands[0])
    elif isinstance(op, ops.WarpVote):
        ok = op.operands[0].type == ScalarType(dtypes.bool_)
    elif isinstance(op, ops.WarpReduce | ops.BlockReduce | ops.BlockScan):
        ok = _collective_type(op.operands[0])
    elif isinstance(op, ops.SharedAlloc):
        t = op.result.type
        ok = isinstance(t, ArrayType) and t.shared is not None and len(t.shared) == t.ndim
    elif isinstance(op, ops.ConstArray):
        t = op.result.type
        ok = (
            isinstance(t, ArrayType)
            and t.const is not None
            and len(t.const) == t.ndim
            and len(op.data) == 2 * op.nbytes
        )
    elif isinstance(op, ops.LocalAlloc):
        t = op.result.type
        ok = isinstance(t, ArrayType) and t.local is not None and len(t.local) == t.ndim
    elif isinstance(op, ops.ThreadIndexAxis):
        ok = isinstance(op.operands[0].type, ThreadIndex2DType)
    elif isinstance(op, ops.Print):
        ok = all(isinstance(v.type, ScalarType) for v in op.operands)
    elif isinstance(op, ops.IndexAdvance):
        index, step = op.operands
        ok = (index.type == THREAD_INDEX and _regs_product(step) == ["nctaid.x", "ntid.x"]) or (
            index.type == BLOCK_INDEX and _regs_product(step) == ["ntid.x", "ntid.y", "ntid.z"]
        )
    elif isinstance(op, ops.BlockRowIndex):
        ok = op.operands[0].type == BLOCK_INDEX
    elif isinstance(op, ops.BlockStep):
        start, k, threads = op.operands
        ok = (
            isinstance(start.owner, ops.BlockIndex1D)
            and k.type == ops.I64
            and _regs_product(threads) == ["ntid.x", "ntid.y", "ntid.z"]
        )
    elif isinstance(op, ops.BlockTileRow):
        row, k, rows = op.operands
        ok = (
            _row_of(row, ops.BlockIndex2D)
            and k.type == ops.I64
            and _regs_product(rows) == ["ntid.y", "ntid.z"]
        )
    elif isinstance(op, ops.TileRow):
        local, rows, block_y = op.operands
        const = rows.owner
        ok = (
            _row_of(local, ops.BlockTileRow)
            and isinstance(const, ops.Constant)
            and rows.type == ops.I64
            and const.value >= 1
            and _regs_product(block_y) == ["ctaid.y"]
        )
    elif isinstance(op, ops.CondBr):
        ok = op.cond.type == ScalarType(op.cond.type.dtype) and op.cond.type.dtype.is_bool  # type: ignore[attr-defined]
    elif isinstance(op, ops.Br):
        ok = True
    if not ok:
        raise _fail(fn, "operand types do not fit", op)


def _collective_type(v: Value) -> bool:
    """The values warp and block collectives move: 32- and 64-bit numbers."""
    return isinstance(v.type, ScalarType) and v.type.dtype.name in ops.COLLECTIVE_DTYPES


def _row_of(v: Value, pair: type[Op]) -> bool:
    """Whether `v` is the row (`index.axis 0`) of a pair made by an op of class `pair`."""
    axis = v.owner
    return (
        isinstance(axis, ops.ThreadIndexAxis)
        and axis.axis == 0
        and isinstance(axis.operands[0].owner, pair)
    )


def _regs_product(v: Value) -> list[str] | None:
    """The special registers whose product (each widened to i64) `v` is, sorted: the only
    strides of `index.advance` are nctaid.x * ntid.x and ntid.x * ntid.y * ntid.z."""
    if v.type != ops.I64:
        return None
    op = v.owner
    if isinstance(op, Op) and op.opname == "cast":
        reg = op.operands[0].owner
        return [reg.reg] if isinstance(reg, ops.SpecialReg) else None
    if not (isinstance(op, ops.Binary) and op.kind == "mul"):
        return None
    parts = [_regs_product(x) for x in op.operands]
    return sorted(parts[0] + parts[1]) if parts[0] and parts[1] else None
