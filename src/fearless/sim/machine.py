"""The SIMT machine: one chunk of thread blocks, its lanes stepped through a planned kernel.

`simt.py` plans a kernel (`BlockPlan`s: steps and edges over value slots) and runs a launch
chunk by chunk; this module runs one chunk (`run_chunk`): it picks the waiting block that
comes first in the schedule, runs its steps for exactly the lanes waiting there (an atomic
step updates memory lane by lane, `atomics.py`), retires the
lanes that fail a check, and routes the rest along the terminator. The design, and the choice
of which failure is reported, are told in `simt.py`'s docstring.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..abi import Dim3
from ..errors import InternalError, KernelIndexError, SafetyError
from ..ir.core import Op
from ..ir.simt import ops
from . import barriers


@dataclass(frozen=True)
class SimError:
    """The first failed device check of a launch, as the GPU's device error record holds it."""

    site: int
    block: Dim3
    thread: Dim3
    index: int
    length: int

    def record_words(self) -> list[int]:
        """The record in `abi.py`'s layout: [flag, site, bx, by, bz, tx, ty, tz, index, len]."""
        return [1, self.site, *self.block, *self.thread, self.index, self.length]


# Step kinds and where a step's result goes.
COMPUTE, LOAD, STORE, CHECK, ATOMIC, COLLECTIVE = range(6)
PRINT = 6  # `print`: fn(args, lane count) writes each lane's line, in lane order
NOWHERE, UNIFORM, LOCAL, ESCAPES = range(4)

# One operand: (uniform?, slot). One step: (kind, fn, operands, result slot, destination, op).
Operand = tuple[bool, int]
Step = tuple[int, Callable[..., Any], tuple[Operand, ...], int, int, Op]
# One edge of a terminator: (target's position in the schedule, values, target's arg slots).
Edge = tuple[int, tuple[Operand, ...], tuple[int, ...]]


@dataclass
class BlockPlan:
    steps: list[Step]
    cond: Operand | None  # cond_br's condition; None for br and return
    edges: list[Edge]  # br: one edge; cond_br: true, false; return: none
    barrier: Op | None = None  # the `barrier` its lanes wait at before running it


class Chunk:
    """One chunk of thread blocks: its lanes' values and where each lane waits."""

    def __init__(self, env: list[Any], n: int, b0: int, grid: Dim3, block: Dim3) -> None:
        self.env = env
        self.owned = [False] * len(env)  # env[s] is an array this chunk may write in place
        self.n = n
        self.b0 = b0
        self.grid = grid
        self.block = block
        self.waiting: dict[int, list[Any]] = {0: [None]}  # None: all lanes of the chunk
        self.error: SimError | None = None
        self.steps = 0
        # For kernels with barriers (`barriers.py`): the lanes that returned, and how many
        # lanes of each block a failed check stopped; None when the kernel has no barrier.
        self.returned: np.ndarray[Any, Any] | None = None
        self.stopped: np.ndarray[Any, Any] | None = None
        # Which slots of each shared array some thread of its block has written, by the id of
        # the array (`SimKernel.run` makes both): a read of any other slot is an error, as
        # the GPU's shared memory holds what an earlier block left there.
        self.written: dict[int, np.ndarray[Any, Any]] = {}

    def per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def coords(self, lane: int) -> tuple[Dim3, Dim3]:
        t_per_block = self.block[0] * self.block[1] * self.block[2]
        b, t = divmod(lane, t_per_block)
        return _unlinear(self.b0 + b, self.grid), _unlinear(t, self.block)


def _unlinear(i: int, dims: Dim3) -> Dim3:
    return i % dims[0], (i // dims[0]) % dims[1], i // (dims[0] * dims[1])


def run_chunk(blocks: list[BlockPlan], dtypes: list[Any], ck: Chunk) -> None:
    """Step the chunk's lanes through the kernel until every lane has retired."""
    waiting, n = ck.waiting, ck.n
    stalled: set[int] = set()  # barriers whose blocks wait for other lanes
    while waiting:
        position = min((p for p in waiting if p not in stalled), default=None)
        if position is None:
            raise barriers.deadlock(blocks, ck)
        parts = waiting.pop(position)
        lanes = parts[0] if len(parts) == 1 else _merge(parts, n)
        bp = blocks[position]
        if bp.barrier is not None:
            lanes, wait = barriers.arrive(bp.barrier, lanes, ck)
            if wait is not None:
                waiting[position] = [wait]
            if lanes is not None and lanes.size == 0:
                stalled.add(position)
                continue
        stalled.clear()
        _step(bp, dtypes, lanes, ck)
        ck.steps += 1


def _step(bp: BlockPlan, dtypes: list[Any], lanes: np.ndarray[Any, Any] | None, ck: Chunk) -> None:
    """Run one block for `lanes` (None: every lane of the chunk), then route them."""
    env = ck.env
    local: dict[int, Any] = {}

    def get(operand: Operand) -> Any:
        uniform, s = operand
        if uniform:
            return env[s]
        x = local.get(s)
        if x is None:
            x = env[s] if lanes is None else env[s][lanes]
            local[s] = x
        return x

    for kind, fn, ins, out, dest, op in bp.steps:
        args = [get(o) for o in ins]
        if kind == COMPUTE:
            r = fn(*args)
        elif kind == LOAD:
            r = _access(fn, args[0], args[1:], None, op, lanes, ck)
        elif kind == STORE:
            _access(fn, args[0], args[1:-1], args[-1], op, lanes, ck)
            continue
        elif kind == COLLECTIVE:  # every running lane of the blocks (barriers.arrive)
            r = fn(args, lanes, ck)
        elif kind == PRINT:
            fn(args, ck.n if lanes is None else lanes.size)
            continue
        elif kind == ATOMIC:  # (array, one index per axis, values)
            rank = 1 + args[0].ndim
            _in_range(args[0], args[1:rank], op, lanes, ck)
            _mark_shared(args[0], args[1:rank], op, lanes, ck)
            r = fn(args[0], args[1:rank], args[rank:], ck.n if lanes is None else lanes.size)
        else:
            keep = _check(args, op, lanes, ck)
            if keep is None:
                continue
            if keep.size == 0:
                return  # every lane of this step stopped
            lanes = keep if lanes is None else lanes[keep]
            for s, x in local.items():
                if np.ndim(x):
                    local[s] = x[keep]
            continue
        if dest == UNIFORM:
            env[out] = r
        else:
            local[out] = r
            if dest == ESCAPES:
                _put(ck, dtypes[out], out, lanes, r)
    if not bp.edges:
        if ck.returned is not None:
            ck.returned[slice(None) if lanes is None else lanes] = True
        return  # return: the lanes retire
    # (edge, the lanes taking it, their positions among this step's lanes or None: all)
    routes: list[tuple[Edge, Any, Any]]
    if bp.cond is None:
        routes = [(bp.edges[0], lanes, None)]
    else:
        c = get(bp.cond)
        if np.ndim(c) == 0:
            routes = [(bp.edges[0 if c else 1], lanes, None)]
        else:
            taken = np.flatnonzero(c)
            if taken.size == c.size:
                routes = [(bp.edges[0], lanes, None)]
            elif taken.size == 0:
                routes = [(bp.edges[1], lanes, None)]
            else:
                other = np.flatnonzero(~c)
                routes = [
                    (bp.edges[0], taken if lanes is None else lanes[taken], taken),
                    (bp.edges[1], other if lanes is None else lanes[other], other),
                ]
    # A branch is a parallel copy: read every value before writing any argument.
    values = [[_pick(get(o), pos) for o in edge[1]] for edge, _, pos in routes]
    for (edge, sub, _), vals in zip(routes, values, strict=True):
        target, _, arg_slots = edge
        for s, v in zip(arg_slots, vals, strict=True):
            _put(ck, dtypes[s], s, sub, v)
        ck.waiting.setdefault(target, []).append(sub)


def _check(
    args: Any, op: Op, lanes: np.ndarray[Any, Any] | None, ck: Chunk
) -> np.ndarray[Any, Any] | None:
    """`check.bounds`: None if every lane passes all pairs, else the positions of those that do.

    A failing lane stops; the error recorded is the lowest failing lane's first failing pair.
    """
    oks = [
        np.less(
            np.asarray(args[2 * k]).astype(np.uint64), np.asarray(args[2 * k + 1]).astype(np.uint64)
        )
        for k in range(len(args) // 2)
    ]
    ok = oks[0] if len(oks) == 1 else np.logical_and.reduce(np.broadcast_arrays(*oks))
    if ok.ndim == 0:
        if ok:
            return None
        first_bad = 0
        keep = np.zeros(0, np.intp)
    else:
        if ok.all():
            return None
        first_bad = int(np.argmin(ok))
        keep = np.flatnonzero(ok)
    if ck.stopped is not None:
        failed = (
            np.flatnonzero(~ok) if ok.ndim else np.arange(ck.n if lanes is None else lanes.size)
        )
        lost = failed if lanes is None else lanes[failed]
        np.add.at(ck.stopped, lost // ck.per_block(), 1)
    if ck.error is None:
        pair = next(k for k, o in enumerate(oks) if not bool(_pick(o, first_bad)))
        lane = first_bad if lanes is None else int(lanes[first_bad])
        block, thread = ck.coords(lane)
        ck.error = SimError(
            op.attrs["sites"][pair],
            block,
            thread,
            int(_pick(args[2 * pair], first_bad)),
            int(_pick(args[2 * pair + 1], first_bad)),
        )
    return keep


# ----------------------------------------------------------------------------- lane data


def _pick(x: Any, positions: Any) -> Any:
    """`x` at some positions of the step's lanes (a uniform value stays as it is)."""
    if positions is None or not np.ndim(x):
        return x
    return x[positions]


def _put(ck: Chunk, dtype: Any, s: int, lanes: np.ndarray[Any, Any] | None, v: Any) -> None:
    """Write a per-lane value at `lanes` (None: all) of the chunk's array for slot `s`."""
    if getattr(v, "dtype", dtype) != dtype:
        raise InternalError(f"the simulator made a {v.dtype} where {dtype} was due")
    if lanes is None:
        ck.env[s] = v if np.ndim(v) else np.full(ck.n, v, dtype)
        ck.owned[s] = False  # it may be another value's array: copy before writing into it
        return
    arr = ck.env[s]
    if arr is None:
        arr = ck.env[s] = np.zeros(ck.n, dtype)
        ck.owned[s] = True
    elif not ck.owned[s]:
        arr = ck.env[s] = arr.copy()
        ck.owned[s] = True
    arr[lanes] = v


def _merge(parts: list[Any], n: int) -> np.ndarray[Any, Any] | None:
    """The union of disjoint sorted lane sets (None when it is every lane)."""
    lanes = np.concatenate(parts)
    if lanes.size == n:
        return None
    lanes.sort(kind="stable")  # a merge of sorted runs
    return lanes


def thread_register(reg: str, grid: Dim3, block: Dim3, b0: int, b1: int) -> Any:
    """A thread register for the lanes of blocks [b0, b1): `tid.x`, ..., `laneid`, `index_1d`.

    `index_1d` and `index_col` are ctaid.x * ntid.x + tid.x, `index_row` is
    ctaid.y * ntid.y + tid.y, all in i64 (the coordinates of `thread.index_2d`).
    """
    per_block = block[0] * block[1] * block[2]
    t = np.arange(per_block, dtype=np.int64)
    b = np.arange(b0, b1, dtype=np.int64)
    if reg in ("index_1d", "index_col"):
        return np.repeat(b % grid[0] * block[0], per_block) + np.tile(t % block[0], b1 - b0)
    if reg == "index_row":
        return np.repeat(b // grid[0] % grid[1] * block[1], per_block) + np.tile(
            t // block[0] % block[1], b1 - b0
        )
    if reg == "block_id":  # index.block_row's row: the block's linear index in the grid
        return np.repeat(b, per_block)
    if reg == "block_linear":  # thread.block_index_1d: the linear position in the block
        return np.tile(t, b1 - b0)
    if reg in ("block_row", "block_col"):  # thread.block_index_2d: (t // ntid.x, t % ntid.x)
        return np.tile(t // block[0] if reg == "block_row" else t % block[0], b1 - b0)
    if reg == "chunk_lane":  # the lane's position in the chunk: its local arrays' row
        return np.arange((b1 - b0) * per_block, dtype=np.int64)
    if reg == "chunk_block":  # the lane's block within the chunk: its shared arrays' row
        return np.repeat(np.arange(b1 - b0, dtype=np.int64), per_block)
    if reg == "laneid":  # warps are runs of 32 threads in the block's linear order
        return np.tile((t % 32).astype(np.int32), b1 - b0)
    name, axis = reg.split(".")
    k = "xyz".index(axis)
    if name == "tid":
        comp = (t % block[0], t // block[0] % block[1], t // (block[0] * block[1]))[k]
        return np.tile(comp.astype(np.int32), b1 - b0)
    comp = (b % grid[0], b // grid[0] % grid[1], b // (grid[0] * grid[1]))[k]
    return np.repeat(comp.astype(np.int32), per_block)


def _access(
    fn: Any,
    arr: Any,
    indices: Sequence[Any],
    value: Any,
    op: Op,
    lanes: np.ndarray[Any, Any] | None,
    ck: Chunk,
) -> Any:
    """A load (value None) or store, one index per axis; out-of-range indices here had no
    check before them."""
    _in_range(arr, indices, op, lanes, ck)
    key = indices[0] if len(indices) == 1 else tuple(indices)
    if value is None:
        _mark_shared(arr, indices, op, lanes, ck)
        return fn(arr[key])
    if np.ndim(value):  # many lanes, one element: the last lane wins
        if len(indices) == 1 and not np.ndim(key):
            key = np.broadcast_to(key, value.shape)
        elif len(indices) > 1 and not any(np.ndim(i) for i in indices):
            key = tuple(np.broadcast_to(i, value.shape) for i in indices)
    arr[key] = fn(value)
    _mark_shared(arr, indices, op, lanes, ck)
    return None


def _mark_shared(
    arr: Any, indices: Sequence[Any], op: Op, lanes: np.ndarray[Any, Any] | None, ck: Chunk
) -> None:
    """For a shared array (indices: the lane's block in the chunk, then the slot's): a store
    or `atomic.exch` marks the slots written; a load or any other atomic, which reads the
    slot, raises unless some thread of the block wrote it first, or the launch has already
    failed a check (its error is the one reported)."""
    written = ck.written.get(id(arr)) if ck.written else None
    if written is None:
        return
    key = tuple(indices)
    if isinstance(op, ops.Store) or (isinstance(op, ops.AtomicRMW) and op.attrs["kind"] == "exch"):
        written[key] = True
        return
    if ck.error is not None:  # the launch failed a check: a stopped thread's slot stays unwritten
        return
    ok = written[key]
    if np.ndim(ok) == 0:
        if ok:
            return
        pos = 0
    elif ok.all():
        return
    else:
        pos = int(np.argmin(ok))
    _unwritten_read(op, [_pick(i, pos) for i in indices[1:]], pos, lanes, ck)


def _unwritten_read(
    op: Op, slot: list[Any], pos: int, lanes: np.ndarray[Any, Any] | None, ck: Chunk
) -> None:
    lane = pos if lanes is None else int(lanes[pos])
    block, thread = ck.coords(lane)
    name = op.operands[0].name or "the shared array"
    at = ", ".join(str(int(i)) for i in slot)
    what = "an atomic reads" if isinstance(op, ops.AtomicRMW | ops.AtomicCAS) else "a read of"
    raise SafetyError(
        f"`{name}[{at}]` is read before any thread of its block wrote it",
        op.loc,
        code="E0632",
        label=f"{what} an uninitialised shared slot",
        notes=[
            f"in block {block}, thread {thread} (CPU simulator)",
            "shared memory is not initialised on the GPU: a slot no thread of the block has "
            "written holds whatever an earlier block or kernel left there",
        ],
        help=f"write every slot of `{name}` the block reads before a `simt.syncthreads()`, "
        f"e.g. `{name}[j] = 0` at each thread's own slot `j = simt.thread.block_index_1d()`",
    )


def _in_range(
    arr: Any, indices: Sequence[Any], op: Op, lanes: np.ndarray[Any, Any] | None, ck: Chunk
) -> None:
    """Raise for the first lane whose index is out of range: the access had no check."""
    for axis, idx in enumerate(indices):
        length = arr.shape[axis]
        if np.ndim(idx):
            bad = (idx < 0) | (idx >= length) if idx.size else None
            if bad is not None and bad.any():
                _unchecked_fault(op, arr, axis, idx, int(np.argmax(bad)), lanes, ck)
        elif not 0 <= idx < length:
            _unchecked_fault(op, arr, axis, idx, 0, lanes, ck)


def _unchecked_fault(
    op: Op,
    arr: Any,
    axis: int,
    idx: Any,
    pos: int,
    lanes: np.ndarray[Any, Any] | None,
    ck: Chunk,
) -> None:
    lane = pos if lanes is None else int(lanes[pos])
    block, thread = ck.coords(lane)
    what = "read" if isinstance(op, ops.Load) else "write"
    on_axis = [f"on axis {axis} of `{op.operands[0].name}`"] if arr.ndim > 1 else []
    raise KernelIndexError(
        f"index out of bounds: the len is {arr.shape[axis]} but the index is "
        f"{int(_pick(idx, pos))}",
        op.loc,
        label=f"unchecked {what}",
        notes=[
            *on_axis,
            f"in block {block}, thread {thread} (CPU simulator)",
            "this access has no device check (an `unsafe` kernel, or a check the compiler "
            "proved unnecessary); on the GPU it is undefined behaviour",
        ],
    )
