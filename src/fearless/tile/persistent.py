"""`for t in part.tiles():`: the tiles of a Part that this block owns, for persistent launches.

Block b of a grid of G blocks (b and G linear over the grid's three axes, x fastest) walks the
Part's tiles b, b + G, b + 2G, ... below the tile count, the tiles numbered in the partition's
order (row-major, or grouped: order.py). `part.tiles(offset=n)` goes on from a walk over n
tiles before: block b starts at (b - n) mod G, so several Parts walked one after another (a
group GEMM's outputs, a tuple parameter: tuples.py) share the blocks as one walk over all
their tiles would.
The blocks' sets are disjoint whatever G is, so `kernel.launch(grid, ...)` may choose any grid
(a persistent kernel takes about one block per SM and loops), and a plain `kernel(...)` call,
whose grid has one block per tile, gives each block exactly one tile. In the body, `t.index`
is the tile's coordinates (i32 scalars, like `part.index`), `t.shape` the tile shape,
`t.store(x)` writes the tile (`tile.store_at`, the only op that stores at a computed index),
and `tile.load_like(x, t)` reads `x`'s tile at the same index.
"""

from __future__ import annotations

import ast
from typing import Any

from ..errors import CompileError, KernelTypeError, LaunchContractError
from ..frontend.values import Weak
from ..ir.core import Value
from ..ir.tile import ops
from ..ir.tile.kernel import TileIR
from ..ir.tile.types import ArrayParamType
from .control import lower_loop
from .order import own_index, tile_counts, tile_index
from .rules import TileRules


class TileCursor:
    """The loop variable of `for t in part.tiles()` (one tile of `part`, at `index`) or of
    `for c in part.chunks(shape)` (one chunk of `shape` of the block's tile: `index` counts
    chunks of that shape)."""

    def __init__(
        self,
        part: Value,
        index: tuple[Value, ...],
        shape: tuple[int, ...] | None = None,
        own: bool = False,
    ) -> None:
        self.part, self.index, self.shape = part, index, shape
        self.own = own  # a chunk of the block's own tile (StoreAt's `own`)

    @property
    def tile(self) -> tuple[int, ...]:
        if self.shape is not None:
            return self.shape
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
    if call.args or any(k.arg != "offset" for k in call.keywords):
        raise CompileError(
            "`tiles()` takes no arguments but `offset=`",
            loc,
            code="E0061",
            help="`for t in part.tiles():`, or `part.tiles(offset=n)` to go on from a walk "
            "over n tiles before (a group GEMM's earlier groups)",
        )
    offset = None
    if call.keywords:
        k = call.keywords[0]
        offset = lw.index(lw.expr(k.value), lw.loc(k.value))
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
        if offset is not None:  # block b starts at (b - offset) mod G: a permutation of the
            # blocks, so their sets stay disjoint; offset mod G first, so nothing overflows
            skew = lw.binary("mod", offset, blocks, loc)
            linear = _i32(
                lw.binary(
                    "mod",
                    lw.binary("sub", lw.binary("add", linear, blocks, loc), skew, loc),
                    blocks,
                    loc,
                )
            )
        return linear, total, blocks

    def bind(iv: Value) -> TileCursor:
        return TileCursor(part, tile_index(lw, part, iv, counts, loc))

    lower_loop(lw, node, target, bounds, bind)


def lower_chunks(lw: TileRules, node: ast.For, target: str, call: ast.Call, base: object) -> None:
    """`for c in part.chunks(shape): body`: the chunks of `shape` of this block's tile of
    `part` (or of a tile `part.tiles()` gave), in row-major order, in a `tile.for`. Chunk k of
    the tile at index i is at chunk index i * (tile // shape) + unravel(k): inside the tile,
    so the block still writes only what it owns. For long rows: a block reads its row in
    chunks, then writes it in chunks, and never holds the whole row in registers."""
    loc = lw.loc(call)
    own = False
    if isinstance(base, TileCursor) and base.shape is None:
        part, index, tile = base.part, base.index, base.tile
    elif isinstance(base, Value) and isinstance(base.type, ArrayParamType) and base.type.is_part:
        part, index, tile, own = base, own_index(lw, base, loc), base.type.tile or (), True
    else:
        raise KernelTypeError(
            f"`{ast.unparse(call.func)}` needs a `tile.Part` (or a tile of `part.tiles()`)",
            loc,
            help="split a partitioned output's tile: `for c in out.chunks((BM, 1024)):`",
        )
    if len(call.args) != 1 or call.keywords:
        raise CompileError("`chunks(shape)` takes the chunk shape", loc, code="E0061")
    shape = lw.static_shape(lw.expr(call.args[0]), lw.loc(call.args[0]))
    if len(shape) != len(tile) or any(c > t for c, t in zip(shape, tile, strict=False)):
        raise KernelTypeError(
            f"chunks of shape {shape} do not split tiles of shape {tile}",
            lw.loc(call.args[0]),
            help=f"give one power of two per axis, each at most the tile's: e.g. "
            f"`{(*tile[:-1], min(tile[-1], 1024))}`",
        )
    ratio = [t // c for t, c in zip(tile, shape, strict=True)]
    n = 1
    for r in ratio:
        n *= r

    def bounds() -> tuple[Value, Value, Value]:
        return lw.index(Weak(0), loc), lw.index(Weak(n), loc), lw.index(Weak(1), loc)

    def bind(iv: Value) -> TileCursor:
        within: list[Value] = []
        rest = iv
        for r in reversed(ratio):
            if r == 1:
                within.append(lw.index(Weak(0), loc))
                continue
            within.append(_i32(lw.binary("mod", rest, Weak(r), loc)))
            rest = _i32(lw.binary("floordiv", rest, Weak(r), loc))
        coords = tuple(
            _i32(lw.binary("add", lw.binary("mul", i, Weak(r), loc), k, loc))
            for i, r, k in zip(index, ratio, reversed(within), strict=True)
        )
        return TileCursor(part, coords, shape, own)

    lower_loop(lw, node, target, bounds, bind)


def _i32(v: object) -> Value:
    """An i32 scalar the rules returned (index arithmetic on i32 values stays a Value)."""
    assert isinstance(v, Value)
    return v


# ------------------------------------------------------------------- host-chosen grids


def check_host_grid_launch(name: str, ir: TileIR) -> None:
    """A host-chosen grid keeps blocks disjoint only through `part.tiles()` (tile.store_at);
    a plain `part.store(x)` writes the block's own tile, which needs the partition's grid."""
    store = _first_plain_store(ir.fn.entry)
    if store is not None:
        part = store.operands[0].name
        raise LaunchContractError(
            f"`{name}` stores `{part}`'s own tile with `{part}.store(...)`, which only the "
            f"partition's grid makes disjoint, so it cannot run on a grid the host chooses",
            store.loc,
            help=f"walk the tiles with `for t in {part}.tiles(): t.store(...)` to launch with "
            f"`{name}.launch(grid, ...)`, or call `{name}(...)` for one block per tile",
        )


def _first_plain_store(block: Any) -> Any:
    for op in block.ops:
        if isinstance(op, ops.Store) or op.attrs.get("own"):
            return op
        for region in ops.regions(op):
            found = _first_plain_store(region)
            if found is not None:
                return found
    return None
