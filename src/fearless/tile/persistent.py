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

The shares are disjoint only while every block deals the tiles alike, so `check_walks` refuses
(E0601) what would deal them differently: an offset that is not the same in every block and on
every trip of the loops around the walk (one that depends on `tile.bid`, on memory, or on a
loop's variable), a Part walked twice with different offsets, and a Part that a block also
stores as its own tile (`part.store(x)`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import CompileError, KernelTypeError, LaunchContractError, Location, SafetyError
from ..frontend.values import PyObj, Weak
from ..ir.core import Block, Function, Op, Value
from ..ir.tile import ops
from ..ir.tile.kernel import TileIR
from ..ir.tile.types import ArrayParamType
from .control import lower_loop
from .order import own_index, tile_counts, tile_index
from .rules import TileRules, absent_error


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


@dataclass(frozen=True)
class Walk:
    """One `for t in part.tiles(offset=...)` as lowered: its `tile.for`, its Part, and its
    offset (None without one) with the offset expression's location."""

    loop: ops.For
    part: Value
    offset: Value | None
    loc: Location


def lower_tiles(lw: TileRules, node: ast.For, target: str, call: ast.Call, part: object) -> None:
    """`for target in part.tiles(): body` (see the module docstring)."""
    loc = lw.loc(call)
    if isinstance(part, PyObj) and part.obj is None:  # an optional Part left out
        raise absent_error(part, loc, f"`{ast.unparse(call.func)}` walks None, not a `tile.Part`")
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
    offset, offset_loc = None, loc
    if call.keywords:
        k = call.keywords[0]
        offset_loc = lw.loc(k.value)
        offset = lw.index(lw.expr(k.value), offset_loc)
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
    loop = lw.block.ops[-1]  # the walk's `tile.for`, the last op lower_loop appends
    assert isinstance(loop, ops.For)
    lw.walks.append(Walk(loop, part, offset, offset_loc))


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
    elif isinstance(base, PyObj) and base.obj is None:  # an optional Part left out
        raise absent_error(base, loc, f"`{ast.unparse(call.func)}` splits None, not a `tile.Part`")
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


# ------------------------------------------------------------------- the walks' shares

# Ops whose result is the same in every block when their operands are.
_PURE = (
    ops.Constant, ops.NumBlocks, ops.ArrayDim, ops.Binary, ops.Compare, ops.Unary, ops.Cast,
    ops.Bitcast, ops.Select, ops.Reshape, ops.Broadcast, ops.Extract, ops.Cat, ops.Permute,
    ops.Iota, ops.Reduce, ops.Scan, ops.Mma,
)  # fmt: skip


def check_walks(fn: Function, walks: list[Walk]) -> None:
    """Refuse the walks of `fn` whose shares could meet (E0601; see the module docstring).
    `walks` holds every walk lowered, some of them from loop bodies lowered again and dropped:
    only those whose loop is in `fn` count."""
    every = list(_all_ops(fn.entry))
    present = {id(op) for op in every}
    kept = [w for w in walks if id(w.loop) in present]
    seen: dict[Value, Walk] = {}
    for w in kept:
        if w.offset is not None:
            why = _varying(w.offset, set(fn.params))
            if why is not None:
                raise SafetyError(
                    f"the offset of `{w.part.name}.tiles(offset=...)` {why}: blocks that start "
                    "from different offsets deal the tiles differently, so two blocks could "
                    "write one tile",
                    w.loc,
                    code="E0601",
                    help="compute the offset from the kernel's parameters, the arrays' shapes "
                    "and constants, once, before any loop around the walk (a running count of "
                    "the tiles walked before: `done = done + tile.num_tiles(...)`)",
                )
        first = seen.setdefault(w.part, w)
        if first is not w and not _same(first.offset, w.offset):
            raise SafetyError(
                f"`{w.part.name}` is walked twice with different offsets: each walk deals its "
                "tiles to the blocks differently, so two blocks could write one tile",
                w.loc,
                code="E0601",
                help=f"walk `{w.part.name}` once, or give both walks the same offset",
            )
    walked = {w.part for w in kept}
    for op in every:
        if _stores_own_tile(op) and op.operands[0] in walked:
            part = op.operands[0].name
            raise SafetyError(
                f"`{part}` is stored as this block's own tile and walked with `{part}.tiles()`: "
                "the walk deals this block other blocks' tiles, so two blocks could write one "
                "tile",
                op.loc,
                code="E0601",
                help=f"write `{part}` one way: `{part}.store(x)` (one block per tile) or "
                f"`for t in {part}.tiles(): t.store(x)`",
            )


def _varying(v: Value, params: set[Value]) -> str | None:
    """Why `v` may differ between blocks or between trips of a loop around its use, or None
    when it is the same everywhere: made of parameters and `_PURE` ops only."""
    stack, seen = [v], set()
    while stack:
        x = stack.pop()
        if x in seen or x in params:
            continue
        seen.add(x)
        op = x.owner
        if not isinstance(op, Op):  # a block's argument, not the kernel's: a loop's variable
            return "changes from one trip of a loop around the walk to the next"
        if isinstance(op, ops.BlockId):
            return "differs from block to block (it depends on `tile.bid`)"
        if isinstance(op, (ops.Load, ops.Gather, ops.AtomicRMW, ops.AtomicCAS)):
            return "is read from memory, which fearless cannot prove the same in every block"
        if isinstance(op, ops.MULTI_RESULT):
            return "comes out of an `if` or a loop, which fearless does not follow"
        if not isinstance(op, _PURE):
            return f"is made by `{op.opname}`, which fearless does not follow"
        stack.extend(op.operands)
    return None


def _same(a: Value | None, b: Value | None) -> bool:
    """Whether two offsets are one value: the same SSA value, or the same pure op (attributes
    included) of the same operands, such as a parameter converted twice."""
    if a is b:
        return True
    if a is None or b is None or a.type != b.type:
        return False
    oa, ob = a.owner, b.owner
    return (
        isinstance(oa, _PURE)
        and type(oa) is type(ob)
        and isinstance(ob, Op)
        and oa.attrs == ob.attrs
        and len(oa.operands) == len(ob.operands)
        and all(_same(x, y) for x, y in zip(oa.operands, ob.operands, strict=True))
    )


def _stores_own_tile(op: Op) -> bool:
    """`part.store(x)`, or a `tile.store_at` of the block's own tile (a chunk of it): disjoint
    only on the partition's grid, with one block per tile."""
    return isinstance(op, ops.Store) or bool(op.attrs.get("own"))


def _all_ops(block: Block) -> Iterator[Op]:
    for op in block.ops:
        yield op
        for region in ops.regions(op):
            yield from _all_ops(region)


# ------------------------------------------------------------------- host-chosen grids


def check_host_grid_launch(name: str, ir: TileIR) -> None:
    """A host-chosen grid keeps blocks disjoint only through `part.tiles()` (tile.store_at);
    a plain `part.store(x)` writes the block's own tile, which needs the partition's grid."""
    store = next((op for op in _all_ops(ir.fn.entry) if _stores_own_tile(op)), None)
    if store is not None:
        part = store.operands[0].name
        raise LaunchContractError(
            f"`{name}` stores `{part}`'s own tile with `{part}.store(...)`, which only the "
            f"partition's grid makes disjoint, so it cannot run on a grid the host chooses",
            store.loc,
            help=f"walk the tiles with `for t in {part}.tiles(): t.store(...)` to launch with "
            f"`{name}.launch(grid, ...)`, or call `{name}(...)` for one block per tile",
        )
