"""Chunk copies: a thread's chunk of W contiguous elements of a row, moved as one access.

`i = simt.thread.block_column(k, W)` is a `ThreadIndex2D<W>`: (b, c) with c = W * (t + k * T),
the first column of the thread's k-th chunk of W columns of its block's row; the thread owns
the whole chunk (the chunks of a row are dealt to the block's threads in turn, so a warp's
chunks are contiguous). Two statements copy a chunk, between a 2-D array and a row of a 2-D
`simt.local.array` with W columns:

    v[k] = x[i]        # x[i.row, i.col + j] into v[k, j] for j < W (any 2-D array, a read;
                       # of a 1-D array w, `g[k] = w[i]` reads w[i.col + j])
    out[i] = v[k]      # v[k, j] into out[i.row, i.col + j]: the thread's own chunk

In the IR each is W scalar accesses, lanes W-1 down to 0, each bounds-checked and marked
`vector=(j, W)` (ir/simt/chunk_groups.py): the chunk's last element is checked first, so a chunk
that runs past the row fails before any element moves, on the GPU as on the simulator. The
backend moves an aligned chunk as one vector (`ld.global.v4.f32` for four f32), else element
by element.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..errors import CompileError, Location
from ..frontend.intrinsics import Call
from ..frontend.values import Weak
from ..ir.core import ArrayType, ThreadIndex2DType, Value
from ..ir.simt import ops
from ..ir.simt.chunk_groups import VECTOR_WIDTHS, vector_fits
from .emitter import Emitter

COPY_HELP = (
    "copy a chunk between an array and a row of a 2-D `simt.local.array` of W columns: "
    "`v[k] = x[i]` and `out[i] = v[k]`, with `i = simt.thread.block_column(k, W)`; read its "
    "elements as `v[k, j]`"
)


@dataclass(frozen=True)
class CopySide:
    """One side of a chunk copy as an expression yields it: no value of its own. Used as one,
    it says what it is and how to copy it (Emitter.not_a_value reads these)."""

    array: Value
    index: Value  # the chunk witness (Chunk) or the local array's row (LocalRow)
    name: str

    value_help = COPY_HELP

    @property
    def value_label(self) -> str:
        return repr(self)


class Chunk(CopySide):
    """`x[i]` for a chunk witness `i`: only the right side of `v[k] = x[i]`."""

    @property
    def width(self) -> int:
        return width_of(self.index)

    def __repr__(self) -> str:
        return f"a chunk of {self.width} elements of `{self.name}`"


class LocalRow(CopySide):
    """`v[k]` of a 2-D local array: only the right side of `out[i] = v[k]`."""

    def __repr__(self) -> str:
        return f"a row of the local array `{self.name}`"


def width_of(v: object) -> int:
    """The chunk width of a `ThreadIndex2D<W>` (1 for any other value)."""
    t = v.type if isinstance(v, Value) else None
    return t.width if isinstance(t, ThreadIndex2DType) else 1


def chunk_width(call: Call) -> int:
    """The width W of `block_column(k, W)`: a constant 2, 4 or 8."""
    w = call.args[1]
    if not (isinstance(w, Weak) and type(w.value) is int and w.value in VECTOR_WIDTHS):
        raise CompileError(
            "simt.thread.block_column(k, width) takes a constant width of 2, 4 or 8",
            call.arg_loc(1),
            label="not 2, 4 or 8",
            help="write `simt.thread.block_column(k, 4)`: chunks of four columns, read and "
            "written as one access (`v[k] = x[i]`, `out[i] = v[k]`)",
        )
    return int(w.value)


def check_row(local: Value, width: int, name: str, loc: Location) -> None:
    """`v` of `v[k]` must be a 2-D local array of `width` columns."""
    t = local.type
    assert isinstance(t, ArrayType) and t.local is not None
    if t.local[1] != width:
        raise CompileError(
            f"a chunk of {width} does not fit a row of `{name}`, which has {t.local[1]} columns",
            loc,
            label="another width",
            help=f"make the local array `simt.local.array((K, {width}), ...)`",
        )


def emit_load(em: Emitter, chunk: Chunk, local: Value, row: Value, loc: Location) -> None:
    """`local[row] = chunk.array[chunk.index]`: W loads (lanes W-1 .. 0), then W local stores."""
    src = chunk.array.type
    assert isinstance(src, ArrayType)
    r, cols = _columns(em, chunk.index, chunk.width, loc)
    marked = vector_fits(chunk.width, src.dtype.itemsize)
    loaded: dict[int, Value] = {}
    for j in reversed(range(chunk.width)):
        vector = (j, chunk.width) if marked else None
        at = [r, cols[j]] if src.ndim == 2 else [cols[j]]  # a 1-D array: the chunk's columns
        loaded[j] = em.emit(ops.Load(chunk.array, at, loc, vector=vector)).result
    for j in range(chunk.width):
        em.emit(ops.Store(local, [row, em.const(j, dtypes.i64, loc)], loaded[j], loc))


def emit_store(em: Emitter, src: LocalRow, out: Value, pair: Value, loc: Location) -> None:
    """`out[pair] = src.array[src.index]`: W local loads, then W stores (lanes W-1 .. 0)."""
    width = width_of(pair)
    dst = out.type
    assert isinstance(dst, ArrayType)
    values = [
        em.emit(ops.Load(src.array, [src.index, em.const(j, dtypes.i64, loc)], loc)).result
        for j in range(width)
    ]
    r, cols = _columns(em, pair, width, loc)
    marked = vector_fits(width, dst.dtype.itemsize)
    for j in reversed(range(width)):
        vector = (j, width) if marked else None
        em.emit(ops.Store(out, [r, cols[j]], values[j], loc, vector=vector))


def _columns(em: Emitter, pair: Value, width: int, loc: Location) -> tuple[Value, list[Value]]:
    """The pair's row and its chunk's columns c, c + 1, ..., c + W - 1 (ir/simt/chunk_groups.py's
    form: `c + j` an add of the constant j to c)."""
    r = em.emit(ops.ThreadIndexAxis(pair, 0, loc)).result
    c = em.emit(ops.ThreadIndexAxis(pair, 1, loc)).result
    cols = [c] + [
        em.emit(ops.Binary("add", c, em.const(j, dtypes.i64, loc), loc)).result
        for j in range(1, width)
    ]
    return r, cols
