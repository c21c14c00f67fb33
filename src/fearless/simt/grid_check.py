"""Grid-level safety of cooperative kernels on the CFG: grid syncs every thread reaches, and
reads of other threads' elements only in grid phases that do not write them.

Run on the kernel's IR right after lowering (`frontend.build_kernel_ir`), before
`sync_check.py` (a `grid.sync` is a block barrier too, which that module checks as one).

Uniformity (E0633). Each `grid.sync` (`simt.cg.this_grid().sync()`) must be reached by every
thread of the grid, so the branches above it must be the same for the whole grid: uniform as
in `sync_check.divergence`, except that `simt.blockIdx` (`ctaid.*`) and `simt.block.reduce`
now differ between threads too. A sync that some block skips hangs every other block.

Phases (E0636). The grid syncs cut a launch into grid phases: every thread finishes phase k
(its writes made visible by the sync's fences) before any thread starts phase k + 1. A read
of another thread's element of a `DisjointSlice`, or a plain read of an `AtomicSlice`, which
`access.py` lowers only after a grid sync in the source (`Context.phased_loads`), is
race-free when no op of the same phase writes that array (a store, or an atomic). The phase
of an op is the set of grid syncs that may have been the last one before it (the entry counts
as one): a forward data-flow over the CFG, around loops too. Two ops that can run in one phase
share a member, since all threads pass each sync together; so a phased read whose set meets
the set of a write of its array is refused. Stores inside `simt.unsafe()` count as writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import SafetyError
from ..ir.core import Block, Function, Op, Value
from ..ir.simt import ops
from .sync_check import divergence

_WRITES = (ops.Store, ops.AtomicRMW, ops.AtomicCAS)
_ENTRY = object()  # the launch's start: the first phase's opening "sync"


def check_grid(fn: Function, phased_loads: Sequence[Op]) -> None:
    """Raise a SafetyError for the first grid sync or phased read that is not safe."""
    if not any(isinstance(op, ops.GridSync) for op in fn.ops()):
        return
    divergent, _ = divergence(fn, grid=True)
    for b in fn.reverse_postorder():
        for op in b.ops:
            if isinstance(op, ops.GridSync) and b in divergent:
                raise _not_uniform(op, divergent[b])
    live = set(fn.ops())
    reads = [op for op in phased_loads if op in live]
    if reads:
        _check_phases(fn, reads)


def _phases(fn: Function) -> dict[Op, frozenset[object]]:
    """Each op's phase: the grid syncs that may be the last one before it (or `_ENTRY`)."""
    order = fn.reverse_postorder()
    preds = fn.predecessors()
    out: dict[Block, frozenset[object]] = {}
    changed = True
    while changed:
        changed = False
        for b in order:
            now = _block_in(b, fn, preds, out)
            for op in b.ops:
                if isinstance(op, ops.GridSync):
                    now = frozenset((op,))
            if out.get(b) != now:
                out[b] = now
                changed = True
    phase: dict[Op, frozenset[object]] = {}
    for b in order:
        now = _block_in(b, fn, preds, out)
        for op in b.ops:
            if isinstance(op, ops.GridSync):
                now = frozenset((op,))
            phase[op] = now
    return phase


def _block_in(
    b: Block, fn: Function, preds: dict[Block, list[Block]], out: dict[Block, frozenset[object]]
) -> frozenset[object]:
    start: frozenset[object] = frozenset((_ENTRY,)) if b is fn.entry else frozenset()
    return start.union(*(out.get(p, frozenset()) for p in preds.get(b, ())))


def _check_phases(fn: Function, reads: list[Op]) -> None:
    phase = _phases(fn)
    writes: dict[Value, list[Op]] = {}
    for op in fn.ops():
        if isinstance(op, _WRITES):
            writes.setdefault(op.operands[0], []).append(op)
    for read in reads:
        arr = read.operands[0]
        for w in writes.get(arr, ()):
            if phase[read] & phase[w]:
                raise _race(read, w, arr)


def _not_uniform(op: Op, branch: Op) -> SafetyError:
    return SafetyError(
        "`simt.cg.this_grid().sync()` under control flow that depends on the thread or block",
        op.loc,
        code="E0633",
        label="not every thread of the grid may get here",
        notes=[
            f"the branch at line {branch.loc.line} depends on the thread's or block's index "
            "or on loaded data (an early `return` counts too), so threads of the grid may "
            "take different paths; a grid sync that some of them skip hangs every block"
        ],
        help="move it where every thread of the grid arrives: out of the `if` (guard only the "
        "memory accesses), or branch on values that are the same for the whole grid (scalar "
        "parameters, `len(...)`, `simt.gridDim`, loop counters)",
    )


def _race(read: Op, write: Op, arr: Value) -> SafetyError:
    name = arr.name or "the array"
    return SafetyError(
        f"`{name}` is read at another thread's element in a grid phase that also writes it",
        read.loc,
        code="E0636",
        label="races with the write on line " + str(write.loc.line),
        notes=[
            f"the write on line {write.loc.line} may run in the same grid phase (between the "
            "same two grid syncs) as this read, in another thread, so the read may see the "
            "element before or after it changes"
        ],
        help="put `simt.cg.this_grid().sync()` between the phase that writes "
        f"`{name}` and the phase that reads other threads' elements of it (each grid phase "
        "either writes an array or reads others' elements of it), or read it inside "
        "`with simt.unsafe():`",
    )
