"""One value per block: `simt.thread.block_id()` and the leader rule (E0601).

    b = simt.thread.block_id()                  # the block's linear index in the grid
    total = simt.block.reduce(v, "sum")
    if simt.thread.block_index_1d() == 0:       # the leader: one thread per block
        partial[b] = total                      # this block's element of a DisjointSlice

`block_id()` is a plain i64 (ctaid.x + nctaid.x * (ctaid.y + nctaid.y * ctaid.z), numba's
`blockIdx.x` in a 1-D grid), the same for every thread of a block and different for every
block. `access.py` lets it index a 1-D DisjointSlice (the value itself, not one computed from
it); this module then checks, on the kernel's CFG after lowering, what makes that race-free:

  - every such access (read or write) runs only on the leader: it is dominated by the true
    edge of `if L == 0` (or the false edge of `if L != 0`, so `if L != 0: return` counts),
    L being `simt.thread.block_index_1d()` (0 for one thread of the block in any block
    shape) or `simt.threadIdx.x` (0 for one thread only in a 1-D block: the kernel's launch
    contract then requires `block_1d`, checked at every launch). L is fixed for a thread, so
    a thread that passed the guard once is the leader for good;
  - the array is opened by the block id only: a thread index `i` of another thread could
    equal some block's id, so `out[i]` and `out[b]` in one kernel would meet (E0601 at the
    second kind of access).

Accesses inside `with simt.unsafe():` are not checked; `unsafe=True` kernels skip the rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import Location, SafetyError
from ..frontend.intrinsics import Call
from ..frontend.values import Operand
from ..ir.analysis import dominators
from ..ir.core import ArrayType, Block, Function, Op, Value
from ..ir.simt import ops
from .ssa import SsaLowerer

LEADER_GUARD = "if simt.thread.block_index_1d() == 0:"


def block_id_rule(lw: SsaLowerer, call: Call) -> Value:
    """`simt.thread.block_id()`: a `thread.block_id`."""
    return lw.em.emit(ops.BlockId(call.loc)).result  # type: ignore[no-any-return]


def is_block_id(x: Operand) -> bool:
    """Whether `x` is the value of `simt.thread.block_id()` itself."""
    return isinstance(x, Value) and isinstance(x.owner, ops.BlockId)


@dataclass(frozen=True)
class LeaderUse:
    """What the leader rule found: whether a guard on `threadIdx.x` needs a 1-D block."""

    block_1d: bool = False


def check_leaders(fn: Function, in_unsafe: Callable[[Location], bool]) -> LeaderUse:
    """Raise E0601 for an access by the block id that is not the leader's alone."""
    accesses = [
        op
        for op in fn.ops()
        if isinstance(op, ops.Load | ops.Store) and _disjoint_1d(op) and not in_unsafe(op.loc)
    ]
    by_block = [op for op in accesses if is_block_id(op.indices[0])]
    if not by_block:
        return LeaderUse()
    opened: dict[Value, Op] = {}  # array -> its first access by the block id
    for op in by_block:
        opened.setdefault(op.operands[0], op)
    for op in accesses:
        first = opened.get(op.operands[0])
        if first is not None and not is_block_id(op.indices[0]):
            raise _two_witnesses(op, first)
    doms = dominators(fn)
    preds = fn.predecessors()
    block_1d = False
    for op in by_block:
        block = op.block
        assert block is not None
        kind = _leader(block, doms, preds)
        if kind is None:
            raise _not_leader(op)
        block_1d = block_1d or kind == "tid.x"
    return LeaderUse(block_1d)


def _disjoint_1d(op: Op) -> bool:
    t = op.operands[0].type
    return isinstance(t, ArrayType) and t.disjoint and t.ndim == 1


def _leader(b: Block, doms: dict[Block, set[Block]], preds: dict[Block, list[Block]]) -> str | None:
    """`"block_index"` or `"tid.x"` when `b` runs only on the leader's side of a guard, else
    None (a guard on block_index_1d wins: it needs no 1-D block)."""
    found: str | None = None
    for d in doms[b]:
        before = preds.get(d, [])
        term = before[0].terminator if len(before) == 1 else None
        if not isinstance(term, ops.CondBr) or term.if_true is term.if_false:
            continue
        cmp = term.cond.owner
        if not (isinstance(cmp, ops.Compare) and cmp.pred in ("eq", "ne")):
            continue
        if (term.if_true if cmp.pred == "eq" else term.if_false) is not d:
            continue
        kind = _is_zero_test(*cmp.operands)
        if kind == "block_index":
            return kind
        found = found or kind
    return found


def _is_zero_test(a: Value, b: Value) -> str | None:
    for x, zero in ((a, b), (b, a)):
        if not (isinstance(zero.owner, ops.Constant) and zero.owner.value == 0):
            continue
        index = ops.block_thread_index(x)
        if index is not None and isinstance(index.owner, ops.BlockIndex1D):
            return "block_index"
        owner = ops.uncast(x).owner
        if isinstance(owner, ops.SpecialReg) and owner.reg == "tid.x":
            return "tid.x"
    return None


def _name(op: Op) -> str:
    return op.operands[0].name or "the array"


def _not_leader(op: Op) -> SafetyError:
    name = _name(op)
    verb = "written" if isinstance(op, ops.Store) else "read"
    return SafetyError(
        f"`{name}[simt.thread.block_id()]` may be {verb} by more than one thread of the block",
        op.loc,
        code="E0601",
        label="not only the block's leader",
        notes=[
            "the block id names one element per block, and all threads of the block have it: "
            "they would race on that element"
        ],
        help=f"let one thread of the block do it: put the access under `{LEADER_GUARD}` "
        "(or `if simt.threadIdx.x == 0:` in a 1-D block); combine the block's values "
        'first with `simt.block.reduce(v, "sum")`',
    )


def _two_witnesses(op: Op, first: Op) -> SafetyError:
    name = _name(op)
    return SafetyError(
        f"`{name}` is indexed by the block id at line {first.loc.line}, so no thread index "
        "opens it",
        op.loc,
        code="E0601",
        label="not the block id",
        notes=[
            "a thread's index may equal another block's id: the thread and that block's "
            "leader would touch one element"
        ],
        help=f"write per-thread results to another DisjointSlice; `{name}` holds one "
        "element per block, written as `" + name + "[simt.thread.block_id()]`",
    )
