"""Block barriers in the SIMT simulator: `simt.syncthreads()` as the GPU runs it.

`simt.py` splits each IR block at its `barrier` ops; the part after a barrier is a `BlockPlan`
whose `barrier` is set, and its lanes wait there (`machine.run_chunk` calls `arrive`) until
every lane of their thread block that can still run has arrived. Then they run on together:
the steps of a block between two barriers are one *phase*, and a thread sees the shared-memory
writes the others made before the barrier.

A lane that failed a bounds check has stopped (the GPU thread returned after reporting) and is
not waited for. A lane that returned while others of its block wait at a barrier, or lanes of
one block waiting at two different barriers with nothing else left to run, is an error
(`SafetyError` E0634 naming the barrier's line), never a hang. The compiler refuses barriers
under thread-dependent control flow (`simt/sync_check.py`), so this happens only in
`unsafe=True` kernels and hand-written IR.

A grid sync (`simt.cg.this_grid().sync()`, an `ops.GridSync`) is the same wait over every lane
of the launch: a cooperative kernel runs as one chunk, all blocks resident as on the GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ..errors import SafetyError
from ..ir.core import Op
from ..ir.simt import ops

Lanes = np.ndarray[Any, Any]


class Chunk(Protocol):
    """What this module reads of `machine.Chunk` (a Protocol: machine.py imports this module)."""

    n: int
    waiting: dict[int, list[Any]]
    returned: Lanes | None
    stopped: Lanes | None

    def per_block(self) -> int: ...

    def coords(self, lane: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]: ...


class BlockPlan(Protocol):
    barrier: Op | None


def arrive(barrier: Op, lanes: Lanes | None, ck: Chunk) -> tuple[Lanes | None, Lanes | None]:
    """Split the lanes waiting at `barrier` into (those that go on, those that keep waiting).

    None for the first: all lanes of the chunk; None for the second: none.
    """
    if lanes is None:
        return None, None
    assert ck.returned is not None and ck.stopped is not None
    if isinstance(barrier, ops.GridSync):
        return _arrive_grid(barrier, lanes, ck)
    t = ck.per_block()
    blk = lanes // t
    arrived = np.bincount(blk, minlength=ck.n // t)
    for b in np.flatnonzero(arrived).tolist():
        block_lanes = ck.returned[b * t : (b + 1) * t]
        if block_lanes.any():
            gone = int(np.argmax(block_lanes))
            raise _not_reached(barrier, ck, b * t + gone, "returned without reaching it")
    complete = arrived + ck.stopped == t
    go = complete[blk]
    if go.all():
        return lanes, None
    return lanes[go], lanes[~go]


def _arrive_grid(barrier: Op, lanes: Lanes, ck: Chunk) -> tuple[Lanes | None, Lanes | None]:
    """A grid sync: the chunk is the whole grid (`simt.py` runs a cooperative kernel in one),
    and its lanes go on together once every lane that can still run is here. After a failed
    check they all leave the kernel instead, as on the GPU (`backends/llvm/grid.py`)."""
    assert ck.returned is not None and ck.stopped is not None
    if ck.returned.any():
        gone = int(np.argmax(ck.returned))
        raise _not_reached(barrier, ck, gone, "returned without reaching it")
    stopped = int(ck.stopped.sum())
    if lanes.size + stopped < ck.n:
        return lanes[:0], lanes
    if stopped:
        return lanes[:0], None  # every waiting lane retires: the launch has failed
    return lanes, None


def deadlock(blocks: Sequence[BlockPlan], ck: Chunk) -> SafetyError:
    """Every waiting lane waits at a barrier that some lanes of its block never reach."""
    t = ck.per_block()
    where: dict[int, Op] = {}
    lane_at: dict[int, int] = {}
    for position, parts in sorted(ck.waiting.items()):
        barrier = blocks[position].barrier
        assert barrier is not None
        for part in parts:
            lanes = np.arange(ck.n) if part is None else np.asarray(part)
            for lane in lanes[np.unique(lanes // t, return_index=True)[1]]:
                b = int(lane) // t
                if b in where and where[b] is not barrier:
                    other = where[b]
                    return _not_reached(
                        barrier,
                        ck,
                        int(lane),
                        f"waits at the barrier on line {barrier.loc.line} while others of its "
                        f"block wait at the one on line {other.loc.line}",
                        at=other,
                    )
                where.setdefault(b, barrier)
                lane_at.setdefault(b, int(lane))
    b, barrier = next(iter(where.items()))
    return _not_reached(barrier, ck, lane_at[b], "never reaches it")


def _not_reached(barrier: Op, ck: Chunk, lane: int, what: str, at: Op | None = None) -> SafetyError:
    block, thread = ck.coords(lane)
    grid = isinstance(barrier, ops.GridSync)
    name = "simt.syncthreads()" if isinstance(barrier, ops.Barrier) else f"simt.{barrier.opname}"
    name = "simt.cg.this_grid().sync()" if grid else name
    return SafetyError(
        f"`{name}` is not reached by every thread of the {'grid' if grid else 'block'}",
        (at or barrier).loc,
        code="E0634",
        label="some threads of the block wait here",
        notes=[
            f"thread {thread} of block {block} {what} (CPU simulator)",
            "on the GPU such a barrier hangs the block or silently misbehaves",
        ],
        help="every thread of a block must reach each barrier and collective: keep them "
        "out of branches and loops that depend on the thread, and do not `return` early "
        "before one",
    )
