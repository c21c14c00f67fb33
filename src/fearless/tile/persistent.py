"""`for t in part.tiles():`: the tiles of a Part that this block owns, for persistent launches.

Block b of a grid of G blocks (b and G linear over the grid's three axes, x fastest) walks the
Part's tiles b, b + G, b + 2G, ... below the tile count, the tiles numbered in the partition's
order (row-major, or grouped: order.py).
The blocks' sets are disjoint whatever G is, so `kernel.launch(grid, ...)` may choose any grid
(a persistent kernel takes about one block per SM and loops), and a plain `kernel(...)` call,
whose grid has one block per tile, gives each block exactly one tile. In the body, `t.index`
is the tile's coordinates (i32 scalars, like `part.index`), `t.shape` the tile shape,
`t.store(x)` writes the tile (`tile.store_at`, the only op that stores at a computed index),
and `tile.load_like(x, t)` reads `x`'s tile at the same index.
"""

from __future__ import annotations

import ast

from ..errors import CompileError, KernelTypeError
from ..ir import tile_ops as ops
from ..ir.core import Value
from ..ir.tile_types import ArrayParamType
from .control import lower_loop
from .order import tile_counts, tile_index
from .rules import TileRules


class TileCursor:
    """The loop variable of `for t in part.tiles()`: one tile of `part`, at `index`."""

    def __init__(self, part: Value, index: tuple[Value, ...]) -> None:
        self.part, self.index = part, index

    @property
    def tile(self) -> tuple[int, ...]:
        t = self.part.type
        assert isinstance(t, ArrayParamType) and t.tile is not None
        return t.tile


def lower_tiles(lw: TileRules, node: ast.For, target: str, call: ast.Call, part: object) -> None:
    """`for target in part.tiles(): body` (see the module docstring)."""
    loc = lw.loc(call)
    t = part.type if isinstance(part, Value) else None
    if not isinstance(t, ArrayParamType) or t.tile is None:
        raise KernelTypeError(
            f"`{ast.unparse(call.func)}` needs a `tile.Part`: only a partitioned output has tiles "
            "to walk",
            loc,
            help="declare the parameter `tile.Part[...]` and pass `out.partition(tile_shape)`",
        )
    if call.args or call.keywords:
        raise CompileError("`tiles()` takes no arguments", loc, code="E0061")
    assert isinstance(part, Value)
    counts: list[Value] = []

    def bounds() -> tuple[Value, Value, Value]:
        counts[:] = tile_counts(lw, part, loc)
        total = counts[0]
        for c in counts[1:]:
            total = _i32(lw.binary("mul", total, c, loc))
        ids = [lw.emit(ops.BlockId(a, loc)) for a in range(3)]
        sizes = [lw.emit(ops.NumBlocks(a, loc)) for a in range(3)]
        linear = ids[2]
        for a in (1, 0):
            linear = _i32(lw.binary("add", lw.binary("mul", linear, sizes[a], loc), ids[a], loc))
        blocks = _i32(lw.binary("mul", lw.binary("mul", sizes[0], sizes[1], loc), sizes[2], loc))
        return linear, total, blocks

    def bind(iv: Value) -> TileCursor:
        return TileCursor(part, tile_index(lw, part, iv, counts, loc))

    lower_loop(lw, node, target, bounds, bind)


def _i32(v: object) -> Value:
    """An i32 scalar the rules returned (index arithmetic on i32 values stays a Value)."""
    assert isinstance(v, Value)
    return v
