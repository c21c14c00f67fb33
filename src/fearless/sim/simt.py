"""The CPU simulator of the SIMT IR: runs a kernel's `Function` over every thread of a launch.

It interprets the IR after the safety passes (DESIGN.md section 3), so it is both the
debugger users get and the oracle the compiler is tested against. This module is the entry
point: it plans a kernel (`SimKernel`: value slots, steps and edges per block) and runs a
launch chunk by chunk; `machine.py` steps the lanes of one chunk and `numerics.py` defines the
arithmetic of each op.

Lanes. Every thread of the launch is a lane. The launch runs in chunks of whole thread blocks,
about `CHUNK_LANES` lanes each (blocks communicate only through atomics, which the GPU
performs in any order, so running one chunk after another is one valid execution, and memory
stays bounded; a cooperative kernel, with grid syncs, runs as one chunk). Lane j of a chunk is thread j % T of block
b0 + j // T, with T threads per block and blocks and threads in CUDA's linear order, x
fastest.

Values. A value that all lanes share (constants, scalar parameters, `len`, `ntid`/`nctaid`
and pure ops on those) is one NumPy scalar. Any other value is an array with one element per
lane of the chunk, written only at the lanes that computed it; a value used only in the block
that defines it never leaves that block's step.

Control flow. Each lane has a program counter: the block it waits to run. A step takes the
waiting block that comes first in `schedule_order` (a reverse postorder with each loop before
its exits) and runs its ops once for exactly the lanes waiting there, their values gathered
by lane index, so a lane never computes what its thread would not: no division by zero or
stray load on a lane that took the other branch. The terminator then sends each lane to a
successor, writing the branch's values into the target's block arguments at those lanes, or
retires it on `return`. Lanes split by an `if` meet again at the join, and lanes that leave a
loop early wait at its exit for the last one, so the number of steps follows the longest
thread's path rather than the sum of all paths.

Checks. `check.bounds` retires the lanes whose index is out of range, as the GPU thread
returns, and records an error; all other threads run to completion, as on the GPU. When several
threads fail, the error reported is that of the lowest lane (linear block, then linear thread)
among the failures of the first step, in the first chunk, that had any. The GPU keeps whichever
failing thread wins a compare-and-swap first, which is not deterministic; any failing thread is
a true report, and this choice is reproducible.

Size. A launch of more than `config.sim_max_threads()` threads (FEARLESS_SIM_MAX_THREADS,
default 2**26) is refused before it runs (`check_thread_count`, a LaunchContractError): the
simulator runs some tens of millions of simple threads a second, so a launch the GPU finishes
at once, such as (2**31 - 1) x 1024 threads, would run here for days.

Memory. Loads gather `array[index]` and stores scatter `array[index] = value` into the
caller's arrays, in place, in program order per step (a thread reads its own earlier writes).
Atomics update an element lane after lane in lane order (`atomics.py`).
An access with no check before it (an `unsafe` kernel, or a check the compiler proved
unnecessary) that falls out of range raises `KernelIndexError` at once, naming the access: on
the GPU it would be undefined behaviour.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import config, dtypes
from ..abi import Dim3
from ..errors import ArgumentError, InternalError, KernelTypeError, LaunchContractError
from ..frontend.printing import c_format
from ..ir import core
from ..ir.registry import Registry
from ..ir.simt import ops
from ..runtime.location import read_setting, user_location
from . import atomics, collectives, numerics
from .machine import (
    ATOMIC,
    CHECK,
    COLLECTIVE,
    COMPUTE,
    ESCAPES,
    LOAD,
    LOCAL,
    NOWHERE,
    PRINT,
    STORE,
    UNIFORM,
    BlockPlan,
    Chunk,
    Edge,
    Operand,
    SimError,
    Step,
    run_chunk,
    thread_register,
)
from .schedule import schedule_order

__all__ = ["CHUNK_LANES", "SimError", "SimKernel", "check_thread_count", "run_kernel"]

CHUNK_LANES = 1 << 20


def check_thread_count(name: str, grid: Dim3, block: Dim3) -> None:
    """Refuse a launch of more threads than the simulator runs (`config.sim_max_threads()`)."""
    threads = grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]
    limit = read_setting(
        config.sim_max_threads,
        LaunchContractError,
        "set FEARLESS_SIM_MAX_THREADS to a thread count, e.g. 268435456, or unset it",
    )
    if threads > limit:
        raise LaunchContractError(
            f"this launch of `{name}` has {threads:,} threads (grid={grid}, block={block}), "
            f"more than the simulator runs in one launch: {limit:,}",
            user_location(),
            notes=[
                "this is the simulator's limit (FEARLESS_SIM_MAX_THREADS), not CUDA's: the "
                "grid and block are within a GPU's limits, and the cuda target runs them",
                "the simulator runs some tens of millions of simple threads a second: this "
                f"launch would take about {_duration(threads)} or more",
            ],
            help="on the simulator, test on a smaller input (size the grid from the data: "
            "`(n + 255) // 256`); run this size on the cuda target (`FEARLESS_TARGET=cuda` "
            'or `fl.set_target("cuda")`, on a machine with a GPU); or raise the limit: '
            f"FEARLESS_SIM_MAX_THREADS={threads}",
        )


_SIM_THREADS_PER_SECOND = 20_000_000  # a simple kernel (a load, two ops, a store) on one core


def _duration(threads: int) -> str:
    seconds = threads / _SIM_THREADS_PER_SECOND
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.0f} {unit}"
    return f"{seconds:,.0f} seconds"


def run_kernel(
    fn: core.Function,
    grid: Sequence[int],
    block: Sequence[int],
    args: Sequence[Any],
    *,
    chunk_lanes: int = CHUNK_LANES,
) -> SimError | None:
    """Run `fn` for every thread of a launch; return the first failed check, if any.

    `args[i]` is the value of `fn.params[i]`: a NumPy array of the parameter's rank for an
    array parameter (a `DisjointSlice` is written in place) or a Python/NumPy scalar.
    """
    return SimKernel(fn).run(grid, block, args, chunk_lanes=chunk_lanes)


class SimKernel:
    """A kernel planned for the simulator once; `run` it for any number of launches.

    The plan reads the IR when it is made: build a new `SimKernel` after changing `fn`.
    """

    def __init__(self, fn: core.Function) -> None:
        self.fn = fn
        order = schedule_order(fn)
        if any(fn.entry in b.successors() for b in order):
            raise InternalError(f"@{fn.name}: a branch targets the entry block")
        self._slots: dict[core.Value, int] = {}
        self._dtypes: list[np.dtype[Any] | None] = []
        self._env0: list[Any] = []
        self._uniform: set[core.Value] = set(fn.params)
        self._thread_values: list[tuple[int, str]] = []  # per-lane registers, per chunk
        self._launch_values: list[tuple[int, str]] = []  # ntid.*, nctaid.*
        self._params = [self._slot(p) for p in fn.params]
        self._shared_values: list[tuple[int, tuple[int, ...], np.dtype[Any]]] = []
        self._local_values: list[tuple[int, tuple[int, ...], np.dtype[Any]]] = []
        self._chunk_slots: dict[str, int] = {}  # `_chunk_register`'s slots
        # Each block is planned as one part per barrier it holds, plus one: the positions of a
        # block's parts follow each other, and a part after a barrier waits there (barriers.py).
        position: dict[core.Block, int] = {}
        k = 0
        for b in order:
            position[b] = k
            k += 1 + sum(isinstance(op, (ops.Barrier, *ops.COLLECTIVES)) for op in b.ops)
        self._has_barriers = k > len(order)
        # A grid sync waits for every block: a cooperative launch runs as one chunk.
        self.cooperative = ops.is_cooperative(fn)
        used_in = core.uses(fn)
        self._blocks = [p for b in order for p in self._plan_block(b, position, used_in)]

    # ------------------------------------------------------------------------------ plan

    def _slot(self, v: core.Value) -> int:
        s = self._slots.get(v)
        if s is None:
            s = self._slots[v] = len(self._env0)
            self._env0.append(None)
            self._dtypes.append(_storage(v.type))
        return s

    def _operand(self, v: core.Value) -> Operand:
        if v not in self._slots:
            raise InternalError(f"@{self.fn.name}: {v!r} is used before it is defined")
        return v in self._uniform, self._slots[v]

    def _chunk_register(self, reg: str) -> Operand:
        """The slot of a per-lane register of the chunk ("chunk_block": the lane's block in
        its chunk, the row of its shared arrays; "chunk_lane": its own row of local arrays)."""
        slot = self._chunk_slots.get(reg)
        if slot is None:
            slot = self._chunk_slots[reg] = len(self._env0)
            self._env0.append(None)
            self._dtypes.append(np.dtype(np.int64))
            self._thread_values.append((slot, reg))
        return False, slot

    def _plan_block(
        self,
        b: core.Block,
        position: dict[core.Block, int],
        used_in: dict[core.Value, list[core.Op]],
    ) -> list[BlockPlan]:
        for a in b.args:
            if b is not self.fn.entry and not isinstance(
                a.type, core.ScalarType | core.ThreadIndexType
            ):
                raise InternalError(f"the simulator has no block arguments of type {a.type}")
            self._slot(a)
        term = b.terminator
        if term is None:
            raise InternalError(f"@{self.fn.name}: block ^bb{b.id} has no terminator")
        steps: list[Step] = []
        parts: list[BlockPlan] = []
        barrier: core.Op | None = None  # the barrier the current part waits at
        part_of: dict[core.Op, int] = {}  # a barrier ends a part, a collective starts one
        part = 0
        for op in b.ops:
            part += isinstance(op, ops.COLLECTIVES)
            part_of[op] = part
            part += isinstance(op, ops.Barrier)
        for op in b.ops[:-1]:
            if isinstance(op, (ops.Barrier, *ops.COLLECTIVES)):  # a collective waits as one
                next_part = (position[b] + len(parts) + 1, (), ())
                parts.append(BlockPlan(steps, None, [next_part], barrier))
                steps, barrier = [], op
                if isinstance(op, ops.Barrier):
                    continue
            kind, fn = plans.lookup(op)(self, op)
            ins = tuple(self._operand(v) for v in op.operands)
            if isinstance(op, _SHARED_ACCESS) and _shared_shape(op.operands[0]):
                ins = (ins[0], self._chunk_register("chunk_block"), *ins[1:])  # a block's own copy
            elif isinstance(op, ops.Load | ops.Store) and _local_shape(op.operands[0]):
                ins = (ins[0], self._chunk_register("chunk_lane"), *ins[1:])  # a thread's own copy
            if not op.results:
                steps.append((kind, fn, ins, -1, NOWHERE, op))
                continue
            r = op.result
            out = self._slot(r)
            if fn is _prefilled:
                continue  # a constant or a thread register: written before the block runs
            if kind == COMPUTE and all(u for u, _ in ins):
                self._uniform.add(r)
                dest = UNIFORM
            elif any(
                use.block is not b or part_of[use] != part_of[op] for use in used_in.get(r, ())
            ):
                dest = ESCAPES
            else:
                dest = LOCAL
            steps.append((kind, fn, ins, out, dest, op))
        cond: Operand | None = None
        edges: list[Edge] = []
        if isinstance(term, ops.CondBr):
            cond = self._operand(term.cond)
        if isinstance(term, ops.Br | ops.CondBr):
            for dest_block in term.successors():
                vals = ops.branch_args(term, dest_block)
                edges.append(
                    (
                        position[dest_block],
                        tuple(self._operand(v) for v in vals),
                        tuple(self._slot(a) for a in dest_block.args),
                    )
                )
        elif not isinstance(term, ops.Return):
            raise InternalError(f"the simulator has no terminator `{term.opname}`")
        parts.append(BlockPlan(steps, cond, edges, barrier))
        return parts

    # ------------------------------------------------------------------------------- run

    def run(
        self,
        grid: Sequence[int],
        block: Sequence[int],
        args: Sequence[Any],
        *,
        chunk_lanes: int = CHUNK_LANES,
        stats: dict[str, int] | None = None,
    ) -> SimError | None:
        """Run one launch; return its first failed check or None. `stats` gets step counts."""
        g, bl = _dim3(grid), _dim3(block)
        if len(args) != len(self.fn.params):
            raise KernelTypeError(
                f"`{self.fn.name}` takes {len(self.fn.params)} arguments but {len(args)} "
                "were given",
                code="E0061",
            )
        env0 = list(self._env0)
        for p, s, a in zip(self.fn.params, self._params, args, strict=True):
            env0[s] = _bind(p, a)
        dims = {"ntid": bl, "nctaid": g}
        for s, reg in self._launch_values:
            name, axis = reg.split(".")
            env0[s] = np.int32(dims[name]["xyz".index(axis)])
        per_block = bl[0] * bl[1] * bl[2]
        n_blocks = g[0] * g[1] * g[2]
        if per_block == 0 or n_blocks == 0:
            return None
        blocks_per_chunk = n_blocks if self.cooperative else max(1, chunk_lanes // per_block)
        first: SimError | None = None
        total_steps = chunks = 0
        with np.errstate(all="ignore"):  # integers wrap; floats give inf and NaN
            for b0 in range(0, n_blocks, blocks_per_chunk):
                b1 = min(n_blocks, b0 + blocks_per_chunk)
                ck = Chunk(list(env0), (b1 - b0) * per_block, b0, g, bl)
                ck.error = first  # an earlier chunk's failed check stays the one reported
                registers: dict[str, Any] = {}
                for s, reg in self._thread_values:
                    if reg not in registers:
                        registers[reg] = thread_register(reg, g, bl, b0, b1)
                    ck.env[s] = registers[reg]
                for s, shape, dt in self._shared_values:  # one array per block of the chunk
                    ck.env[s] = np.zeros((b1 - b0, *shape), dt)
                    ck.written[id(ck.env[s])] = np.zeros((b1 - b0, *shape), np.bool_)
                for s, shape, dt in self._local_values:  # one array per lane of the chunk
                    ck.env[s] = np.zeros((ck.n, *shape), dt)
                if self._has_barriers:
                    ck.returned = np.zeros(ck.n, np.bool_)
                    ck.stopped = np.zeros(b1 - b0, np.int64)
                run_chunk(self._blocks, self._dtypes, ck)
                first = first or ck.error
                total_steps += ck.steps
                chunks += 1
        if stats is not None:
            stats.update(steps=total_steps, chunks=chunks)
        return first


# ---------------------------------------------------------------------------- arguments


def _storage(t: core.Type) -> np.dtype[Any] | None:
    if isinstance(t, core.ScalarType):
        return numerics.storage_dtype(t.dtype)
    if isinstance(t, core.ThreadIndexType | core.ThreadIndex2DType):  # a pair holds 0 or its column
        return np.dtype(np.int64)
    return None


def _dim3(d: Sequence[int] | int) -> Dim3:
    dims = (d,) if isinstance(d, int | np.integer) else tuple(d)
    if not 1 <= len(dims) <= 3 or any(int(x) < 0 for x in dims):
        raise ValueError(f"launch dimensions must be 1 to 3 non-negative ints, got {d!r}")
    x, y, z = (*(int(v) for v in dims), 1, 1)[:3]
    return x, y, z


def _bind(p: core.Value, a: Any) -> Any:
    """A launch argument as the simulator holds it (arrays are not copied)."""
    t = p.type
    if isinstance(t, core.ScalarType):
        dt = t.dtype
        if dt.name == "bf16" and isinstance(a, np.uint16):
            return numerics.bf16_load(a)[()]  # the dtype's storage: raw bits
        return numerics.constant(a, dt)
    if not isinstance(t, core.ArrayType):
        raise InternalError(f"the simulator has no parameters of type {t}")
    arr = a if isinstance(a, np.ndarray) else np.asarray(a)
    if arr.ndim != t.ndim:
        raise ArgumentError(f"argument `{p.name}` must be a {t.ndim}-D array, not {arr.ndim}-D")
    if t.dtype.name == "bf16":
        if arr.dtype.itemsize != 2 or arr.dtype.kind == "f" or arr.dtype.kind == "i":
            raise ArgumentError(
                f"argument `{p.name}` must hold bf16 (or its uint16 bits), not {arr.dtype}",
            )
        arr = arr.view(np.uint16)
    elif arr.dtype != t.dtype.np:
        try:
            got = dtypes.from_numpy(arr.dtype).name
        except KeyError:
            got = str(arr.dtype)
        raise ArgumentError(
            f"argument `{p.name}` has elements of {got}, but the kernel takes {t.dtype.name}",
        )
    if (t.disjoint or t.atomic) and not arr.flags.writeable:
        raise ArgumentError(f"argument `{p.name}` is a read-only array but the kernel writes it")
    return arr


# -------------------------------------------------------------------------------- planners
# One per op class, registered with `plans` (ir/registry.py): (step kind, function).
# `_prefilled` marks results written before the block runs (constants into the launch's
# values, thread registers into each chunk's). Terminators have none: `_plan_block` turns them
# into the block's edges.
_Planner = Callable[[SimKernel, core.Op], tuple[int, Callable[..., Any]]]
plans: Registry[_Planner] = Registry("the SIMT simulator")


def _prefilled() -> None:  # pragma: no cover - never called
    raise AssertionError


@plans(ops.Constant)
def _plan_constant(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    assert isinstance(op, ops.Constant)
    k._env0[k._slot(op.result)] = numerics.constant(op.value, op.result.dtype)
    k._uniform.add(op.result)
    return COMPUTE, _prefilled


@plans(ops.ThreadIndex1D, ops.BlockIndex1D, ops.BlockId, ops.ThreadIndexAxis, ops.SpecialReg)
def _plan_register(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    if isinstance(op, ops.SpecialReg):
        reg = op.reg
    elif isinstance(op, ops.ThreadIndexAxis):
        pair = op.operands[0].owner
        if isinstance(pair, ops.BlockRowIndex):  # (block, column): the column is the pair's value
            if op.axis == 1:
                return COMPUTE, numerics._identity
            reg = "block_id"
        elif isinstance(pair, ops.BlockTileRow | ops.TileRow):  # (row, column): the row is
            if op.axis == 0:  # the pair's value
                return COMPUTE, numerics._identity
            reg = "block_col" if isinstance(pair, ops.BlockTileRow) else "index_col"
        else:
            block = isinstance(pair, ops.BlockIndex2D)
            reg = (("block_row", "block_col") if block else ("index_row", "index_col"))[op.axis]
    elif isinstance(op, ops.BlockIndex1D):
        reg = "block_linear"
    elif isinstance(op, ops.BlockId):
        reg = "block_id"  # the block's linear index in the grid
    else:
        reg = "index_1d"
    s = k._slot(op.result)
    if reg.startswith(("ntid", "nctaid")):
        k._launch_values.append((s, reg))
        k._uniform.add(op.result)
    else:
        k._thread_values.append((s, reg))
    return COMPUTE, _prefilled


@plans(ops.SharedAlloc, ops.LocalAlloc, ops.ConstArray)
def _plan_static_array(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    """`shared.alloc` / `local.alloc`: an array per block / per lane of each chunk, made by
    `SimKernel.run` (they have a leading axis of blocks / lanes); `const.array`: the array of
    the op's bytes, one for every launch (read-only: nothing stores to it)."""
    t = op.result.type
    assert isinstance(t, core.ArrayType)
    if isinstance(op, ops.ConstArray):
        k._env0[k._slot(op.result)] = op.values(numerics.storage_dtype(t.dtype))
    else:
        arrays = k._shared_values if t.shared is not None else k._local_values
        assert t.static_shape is not None
        arrays.append((k._slot(op.result), t.static_shape, numerics.storage_dtype(t.dtype)))
    k._uniform.add(op.result)
    return COMPUTE, _prefilled


# Ops that index a shared array: each block of a chunk has its own copy (its first axis).
_SHARED_ACCESS = (ops.Load, ops.Store, ops.AtomicRMW, ops.AtomicCAS)


def _shared_shape(v: core.Value) -> tuple[int, ...] | None:
    return v.type.shared if isinstance(v.type, core.ArrayType) else None


def _local_shape(v: core.Value) -> tuple[int, ...] | None:
    return v.type.local if isinstance(v.type, core.ArrayType) else None


@plans(ops.ThreadIndex2D, ops.BlockIndex2D)
def _plan_index_2d(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    # The pair has no value of its own: its coordinates (`index.axis`) are thread registers.
    k._env0[k._slot(op.result)] = np.int64(0)
    k._uniform.add(op.result)
    return COMPUTE, _prefilled


def _scalar_dtype(v: core.Value) -> Any:
    return v.type.dtype if isinstance(v.type, core.ScalarType) else dtypes.i64


@plans(ops.Binary)
def _plan_binary(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    return COMPUTE, numerics.binary_fn(op.attrs["kind"], _scalar_dtype(op.operands[0]))


@plans(ops.Unary)
def _plan_unary(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    return COMPUTE, numerics.unary_fn(op.attrs["kind"], _scalar_dtype(op.operands[0]))


@plans(ops.Compare)
def _plan_compare(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    return COMPUTE, numerics.compare_fn(op.attrs["pred"], _scalar_dtype(op.operands[0]))


@plans(ops.Cast)
def _plan_cast(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    return COMPUTE, numerics.cast_fn(_scalar_dtype(op.operands[0]), op.result.dtype)


@plans(ops.MathCall)
def _plan_math(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    return COMPUTE, numerics.math_fn(op.attrs["fn"], _scalar_dtype(op.operands[0]))


def _plan_simple(fn: Callable[..., Any]) -> Callable[[SimKernel, core.Op], tuple[int, Any]]:
    return lambda k, op: (COMPUTE, fn)


@plans(ops.ArrayLen)
def _plan_len(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    assert isinstance(op, ops.ArrayLen)
    axis = op.axis
    t = op.operands[0].type
    shape = t.static_shape if isinstance(t, core.ArrayType) else None
    if shape is not None:  # the static extent (the array has a leading axis of blocks or lanes)
        return COMPUTE, lambda arr: np.int64(shape[axis])
    return COMPUTE, lambda arr: np.int64(arr.shape[axis])


@plans(ops.Load, ops.Store)
def _plan_memory(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    arr_type = op.operands[0].type
    assert isinstance(arr_type, core.ArrayType)
    bf16 = arr_type.dtype.name == "bf16"
    if isinstance(op, ops.Load):
        return LOAD, numerics.bf16_load if bf16 else numerics._identity
    return STORE, numerics.bf16_store if bf16 else numerics._identity


@plans(ops.AtomicRMW, ops.AtomicCAS)
def _plan_atomic(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    arr_type = op.operands[0].type
    assert isinstance(arr_type, core.ArrayType)
    if isinstance(op, ops.AtomicCAS):
        return ATOMIC, atomics.cas_fn(arr_type.dtype)
    return ATOMIC, atomics.rmw_fn(op.attrs["kind"], arr_type.dtype)


@plans(*ops.COLLECTIVES)
def _plan_collective(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    return COLLECTIVE, collectives.collective_fn(op)


@plans(ops.Print)
def _plan_print(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    fmt = op.attrs["format"]

    def run(args: list[Any], n: int) -> None:
        for lane in range(n):
            vals = [a if np.ndim(a) == 0 else a[lane] for a in args]
            sys.stdout.write(c_format(fmt, vals))

    return PRINT, run


@plans(ops.BlockRowIndex)  # holds its column (see index.axis)
def _plan_block_row(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    """`index.block_row`: the column, times the chunk width of `block_column(k, W)`."""
    assert isinstance(op, ops.BlockRowIndex)
    width = op.width
    return _plan_simple(numerics._identity if width == 1 else lambda c: c * width)(k, op)


def _capped_step(k: Any) -> Any:
    """A step k of `block_column` / `block_index_2d(k)`, taken as unsigned, at most 2^31."""
    return np.minimum(np.asarray(k).astype(np.uint64), 1 << 31).astype(np.int64)


@plans(ops.BoundsCheck)
def _plan_check(k: SimKernel, op: core.Op) -> tuple[int, Callable[..., Any]]:
    return CHECK, numerics._identity


# The planners made from a step function alone: a COMPUTE step that applies it. A barrier's is
# never run: `_plan_block` splits its block there (a GridSync is a Barrier of the whole grid,
# barriers.py).
plans(ops.Barrier, ops.GridSync)(_plan_simple(numerics._identity))
plans(ops.IndexToInt)(_plan_simple(numerics._identity))
plans(ops.IndexAdvance)(_plan_simple(np.add))
plans(ops.Select)(_plan_simple(numerics.select))
plans(ops.BlockStep)(_plan_simple(lambda t, k, n: t + _capped_step(k) * n))
plans(ops.BlockTileRow)(_plan_simple(lambda r, k, n: r + _capped_step(k) * n))
plans(ops.TileRow)(
    _plan_simple(lambda r, rows, by: np.where(r < rows, by * rows + r, np.int64(ops.TILE_ROW_PAST)))
)
