"""Which tile of a Part a block owns: the block's own index, and the order `part.tiles()` walks.

By default block (x, y, z) owns tile (x, y, z) of the partition's grid (a partition of more
than 3 axes numbers its leading axes row-major along x, its last two along y and z), and tile number k of a
Part (row-major, last axis fastest) is its k-th tile. A partition made with
`out.partition(tile, order=tile.grouped(G))` (2-D only) numbers its tiles in groups of G rows
of tiles, column by column within a group, as Triton's grouped GEMM ordering does: blocks that
run together then share rows of A and columns of B in L2. `order=tile.row_major()` (any
number of axes) gives the blocks, in launch order (x fastest), the tiles row-major, last axis
fastest: an attention head's query tiles then run together and share its K and V in L2;
`tile.row_major(reverse=(2,))` numbers axis 2's tiles from the last (causal attention's longest
query tiles first). The numbering is a permutation of the tiles, so it keeps every block's
tiles disjoint (issue 11); a block's own tile (`part.index`, `part.store`,
`tile.load_like(x, part)`) is then the tile its linear block id numbers.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..errors import Location
from ..frontend.values import Weak
from ..ir.core import Value
from ..ir.tile import ops
from ..ir.tile.types import ArrayParamType, reversed_axes


class IndexEmitter(Protocol):
    """What index arithmetic needs of the lowerer: emitting ops and binary arithmetic
    (rules.TileRules, the Tile lowerer, is one)."""

    def emit(self, op: Any) -> Value: ...

    def binary(self, kind: str, a: Any, b: Any, loc: Location) -> Any: ...


def part_type(part: Value) -> ArrayParamType:
    t = part.type
    assert isinstance(t, ArrayParamType) and t.tile is not None
    return t


def tile_counts(lw: IndexEmitter, part: Value, loc: Location) -> list[Value]:
    """The number of tiles along each axis of `part` (i32, from its runtime extents)."""
    counts = []
    for axis, size in enumerate(part_type(part).tile or ()):
        extent = lw.emit(ops.ArrayDim(part, axis, loc))
        padded = _value(lw.binary("add", extent, Weak(size - 1), loc))
        counts.append(_value(lw.binary("floordiv", padded, Weak(size), loc)))
    return counts


def tile_index(
    lw: IndexEmitter, part: Value, number: Value, counts: list[Value], loc: Location
) -> tuple[Value, ...]:
    """The coordinates of tile `number` of `part` in its order (see the module docstring)."""
    group = part_type(part).group
    if group > 0:
        return _grouped(lw, number, counts[0], counts[1], group, loc)
    index: list[Value] = []
    rest = number
    for c in reversed(counts[1:]):
        index.append(_value(lw.binary("mod", rest, c, loc)))
        rest = _value(lw.binary("floordiv", rest, c, loc))
    index.append(rest)
    index.reverse()
    for a in reversed_axes(group) if group < 0 else ():  # tile.row_major(reverse=...)
        last = _value(lw.binary("sub", counts[a], Weak(1), loc))
        index[a] = _value(lw.binary("sub", last, index[a], loc))
    return tuple(index)


def own_index(lw: IndexEmitter, part: Value, loc: Location) -> tuple[Value, ...]:
    """The index of the tile this block owns in a plain launch (one block per tile)."""
    t = part_type(part)
    ids = tuple(lw.emit(ops.BlockId(a, loc)) for a in range(min(t.ndim, 3)))
    if t.group < 0:  # tile.row_major(): the linear block id numbers the tiles row-major
        counts = tile_counts(lw, part, loc)
        return tile_index(lw, part, _linear_id(lw, ids, counts, loc), counts, loc)
    if t.ndim > 3:  # grid x numbers the leading axes row-major (kernel._fold_grid)
        counts = tile_counts(lw, part, loc)
        lead: list[Value] = []
        x = ids[0]
        for c in reversed(counts[1 : t.ndim - 2]):
            lead.append(_value(lw.binary("mod", x, c, loc)))
            x = _value(lw.binary("floordiv", x, c, loc))
        return (x, *reversed(lead), ids[1], ids[2])
    if not t.group:
        return ids
    counts = tile_counts(lw, part, loc)
    number = _value(lw.binary("add", lw.binary("mul", ids[1], counts[0], loc), ids[0], loc))
    return tile_index(lw, part, number, counts, loc)


def _linear_id(
    lw: IndexEmitter, ids: tuple[Value, ...], counts: list[Value], loc: Location
) -> Value:
    """The block's number in launch order, x fastest, on the grid of the tile `counts`
    (grid.fold_grid's: past 3 axes the leading ones fold into x)."""
    grid = list(counts)
    if len(grid) > 3:
        x = grid[0]
        for c in grid[1:-2]:
            x = _value(lw.binary("mul", x, c, loc))
        grid = [x, *grid[-2:]]
    number = ids[-1]
    for a in range(len(ids) - 2, -1, -1):  # ids[0] + grid[0] * (ids[1] + grid[1] * ids[2])
        number = _value(lw.binary("add", ids[a], lw.binary("mul", grid[a], number, loc), loc))
    return number


def _grouped(
    lw: IndexEmitter, pid: Value, m: Value, n: Value, group: int, loc: Location
) -> tuple[Value, Value]:
    b = lw.binary
    in_group = _value(b("mul", n, Weak(group), loc))
    first_m = _value(b("mul", b("floordiv", pid, in_group, loc), Weak(group), loc))
    size_m = _value(b("min", b("sub", m, first_m, loc), Weak(group), loc))
    within = _value(b("mod", pid, in_group, loc))
    row = _value(b("add", first_m, b("mod", within, size_m, loc), loc))
    col = _value(b("floordiv", within, size_m, loc))
    return row, col


def _value(v: object) -> Value:
    """An i32 scalar the rules returned (index arithmetic on Values stays a Value)."""
    assert isinstance(v, Value)
    return v
