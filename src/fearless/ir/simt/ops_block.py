"""The SIMT IR's block-level ops: shared memory, the barriers, the block index, collectives.

Their semantics are told with the other ops' in `ops.py`'s docstring, which re-exports them
(`ops.SharedAlloc`, ...); they live here to keep `ops.py` short.
"""

from __future__ import annotations

from ... import dtypes
from ...dtypes import DType
from ...errors import Location
from ..core import (
    BLOCK_INDEX,
    BLOCK_INDEX_2D,
    THREAD_INDEX_2D,
    ArrayType,
    Effect,
    Function,
    Nullary,
    Op,
    ScalarType,
    ThreadIndex2DType,
    Value,
)


class BlockIndex1D(Nullary, opname="thread.block_index_1d", result=BLOCK_INDEX):
    """`simt.thread.block_index_1d()`: the thread's position in its block (opens shared
    memory)."""


class BlockId(Nullary, opname="thread.block_id", result=ScalarType(dtypes.i64)):
    """`simt.thread.block_id()`: the block's linear index in the grid, a plain i64 that is the
    same for the block's threads (opens a DisjointSlice element under a leader guard:
    `simt/leader.py`)."""


class BlockIndex2D(Nullary, opname="thread.block_index_2d", result=BLOCK_INDEX_2D):
    """`simt.thread.block_index_2d()`: the thread's (row, col) in its block."""


class BlockRowIndex(Op):
    """`simt.thread.block_stride`'s witness: (the block's linear index, the column `c`); with a
    `width` W > 1 (`block_column(k, W)`), (the block, W * c), the first column of the thread's
    chunk of W, typed `ThreadIndex2D<W>`. Its value is the column."""

    opname = "index.block_row"

    def __init__(self, column: Value, loc: Location, width: int = 1) -> None:
        result = THREAD_INDEX_2D if width == 1 else ThreadIndex2DType(width=width)
        super().__init__([column], [result], loc, **({"width": width} if width > 1 else {}))

    @property
    def width(self) -> int:
        return int(self.attrs.get("width", 1))


class BlockStep(Op):
    """`simt.thread.block_column(k)`'s column: the BlockIndex t + k * T (t the thread's position
    in its block, T the block's thread count, k taken as unsigned and at most 2^31)."""

    opname = "index.block_step"

    def __init__(self, start: Value, step: Value, threads: Value, loc: Location) -> None:
        super().__init__([start, step, threads], [BLOCK_INDEX], loc)


class BlockTileRow(Op):
    """`simt.thread.block_index_2d(k)`: the BlockIndex2D (r + k * R, tid.x), r the row of
    `block_index_2d()` and R the block's row count ntid.y * ntid.z (k taken as unsigned and at
    most 2^31): the thread's k-th row of its block's tile. Its value is the row."""

    opname = "index.block_tile_row"

    def __init__(self, row: Value, step: Value, rows: Value, loc: Location) -> None:
        super().__init__([row, step, rows], [BLOCK_INDEX_2D], loc)


class TileRow(Op):
    """`simt.thread.tile_index_2d(k, rows)`: the ThreadIndex2D (ctaid.y * rows + l, ctaid.x *
    ntid.x + tid.x), l the row of a `BlockTileRow`, when l < rows (a constant); a row past any
    array otherwise. Its value is the row."""

    opname = "index.tile_row"

    def __init__(self, local: Value, rows: Value, block_y: Value, loc: Location) -> None:
        super().__init__([local, rows, block_y], [THREAD_INDEX_2D], loc)


# The row `index.tile_row` gives a step past its block's tile: past any array's extent.
TILE_ROW_PAST = 1 << 62


class LocalAlloc(Op):
    """`simt.local.array(shape, dtype)`: the result's `ArrayType.local` is the shape."""

    opname = "local.alloc"

    def __init__(self, dtype: DType, shape: tuple[int, ...], loc: Location, name: str = "") -> None:
        super().__init__([], [ArrayType(dtype, False, len(shape), local=tuple(shape))], loc)
        if name:
            self.name_array(name)

    def name_array(self, name: str) -> None:
        """The user's variable (for messages: a failed bounds check names it), kept in the
        text form as `{name='v'}`."""
        self.attrs["name"] = name
        self.result.name = name


class SharedAlloc(Op):
    """`simt.shared.array(shape, dtype)`: the result's `ArrayType.shared` is the shape."""

    opname = "shared.alloc"

    def __init__(self, dtype: DType, shape: tuple[int, ...], loc: Location, name: str = "") -> None:
        t = ArrayType(dtype, False, len(shape), shared=tuple(shape))
        super().__init__([], [t], loc)
        if name:
            self.name_array(name)

    def name_array(self, name: str) -> None:
        """The user's variable (for messages): kept in the text form as `{name='s'}`."""
        self.attrs["name"] = name
        self.result.name = name


class Barrier(Op):
    """`simt.syncthreads()`: a block-wide barrier (`bar.sync 0`)."""

    opname = "barrier"
    effect = Effect.WRITE

    def __init__(self, loc: Location) -> None:
        super().__init__([], [], loc)


class GridSync(Barrier):
    """`simt.cg.this_grid().sync()`: a grid-wide barrier (a cooperative kernel's). A subclass
    of `Barrier` because it is one for the block too: every rule of block barriers (shared
    memory phases, the simulator's parts) holds for it, and `simt/grid_check.py` adds the
    grid's own."""

    opname = "grid.sync"


def is_cooperative(fn: Function) -> bool:
    """Whether `fn` holds a grid sync: it must then be launched cooperatively (abi.py)."""
    return any(isinstance(op, GridSync) for op in fn.ops())


SHUFFLE_MODES = frozenset(["idx", "down", "xor"])
VOTE_KINDS = frozenset(["all", "any", "ballot"])
COLLECTIVE_OPS = frozenset(["sum", "max", "min"])
COLLECTIVE_DTYPES = frozenset(["i32", "i64", "u32", "u64", "f32", "f64"])


class WarpShuffle(Op):
    opname = "warp.shfl"
    effect = Effect.WRITE  # a collective: never moved, never dropped

    def __init__(self, mode: str, value: Value, lane: Value, loc: Location) -> None:
        assert mode in SHUFFLE_MODES, mode
        super().__init__([value, lane], [value.type], loc, mode=mode)


class WarpVote(Op):
    opname = "warp.vote"
    effect = Effect.WRITE

    def __init__(self, kind: str, cond: Value, loc: Location) -> None:
        assert kind in VOTE_KINDS, kind
        result = ScalarType(dtypes.u32) if kind == "ballot" else cond.type
        super().__init__([cond], [result], loc, kind=kind)


class WarpReduce(Op):
    """`simt.warp.reduce(value, op)`; its siblings `block.reduce` and `block.scan` likewise."""

    opname = "warp.reduce"
    effect = Effect.WRITE

    def __init__(self, op: str, value: Value, loc: Location) -> None:
        assert op in COLLECTIVE_OPS, op
        super().__init__([value], [value.type], loc, op=op)


class BlockReduce(WarpReduce):
    opname = "block.reduce"


class BlockScan(WarpReduce):
    opname = "block.scan"


COLLECTIVES = (WarpShuffle, WarpVote, WarpReduce, BlockReduce, BlockScan)
