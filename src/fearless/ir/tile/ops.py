"""The tile IR's ops: small classes with their operands, attributes and memory effect.

Every op works on whole tiles; after the frontend, elementwise operands already have equal
shapes (it inserts `tile.reshape` / `tile.broadcast` for NumPy broadcasting) so the backends
never broadcast implicitly. Control flow is structured: `tile.for` holds its body block
(arguments: the induction variable, then the loop-carried values; ends in `tile.yield`), and
`tile.if` a then-block and an else-block (no arguments; each ends in a `tile.yield` of the
if's results). `regions(op)` lists the blocks an op holds, for the passes that walk them.

Ownership is built into the ops: `tile.store` takes no index. It writes the Part's tile whose
coordinates are this block's ids, and the launch makes the grid equal to the partition's, so
two blocks never write one element (DESIGN section 1, rule 1). `tile.store_at` takes the
tile's index, and only the frontend's `for t in part.tiles():` emits it, with the index of a
tile that loop gave this block: block b of G walks the tiles b, b + G, b + 2G, ... (in
row-major order), so blocks still never share a tile, whatever the grid
(tile/persistent.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...dtypes import DType, bool_, i32
from ...errors import Location
from ..core import Attr, Block, Choice, Effect, Exit, Op, Value
from .types import ArrayParamType, TileType, tile_type


class Constant(Op):
    """A tile with every element `value` (a splat)."""

    opname = "tile.constant"

    def __init__(self, value: Any, type: TileType, loc: Location) -> None:
        super().__init__([], [type], loc, value=value)


def splat_value(v: Value) -> Any | None:
    """The value of the splat constant `v` is (a literal reaches a tile op reshaped and
    broadcast on its way), else None."""
    owner = v.owner
    while isinstance(owner, Reshape | Broadcast):
        owner = owner.operands[0].owner
    return owner.attrs["value"] if isinstance(owner, Constant) else None


class BlockId(Op):
    """This block's coordinate along `axis` of the grid (i32)."""

    opname = "tile.block_id"

    def __init__(self, axis: int, loc: Location) -> None:
        super().__init__([], [TileType(i32)], loc, axis=axis)


class NumBlocks(Op):
    """The grid's extent along `axis` (i32)."""

    opname = "tile.num_blocks"

    def __init__(self, axis: int, loc: Location) -> None:
        super().__init__([], [TileType(i32)], loc, axis=axis)


class ArrayDim(Op):
    """The runtime extent of an array parameter along `axis` (i32)."""

    opname = "tile.dim"

    def __init__(self, array: Value, axis: int, loc: Location) -> None:
        super().__init__([array], [TileType(i32)], loc, axis=axis)


def _memory_hints(latency: int | None, allow_tma: bool) -> dict[str, Any]:
    """A load's or store's tileiras hints, as attributes only when set."""
    hints: dict[str, Any] = {} if latency is None else {"latency": latency}
    return hints if allow_tma else {**hints, "allow_tma": False}


class Load(Op):
    """Tile `index` (tile coordinates, i32 scalars) of shape `shape` from an array parameter.

    Elements outside the array read as `padding`. `latency` and `allow_tma` are tileiras hints
    (attributes only when set, so the printed IR of a plain load stays short). `order`, set only
    when it is not the identity, maps tile axis d to array axis order[d] (a transposed load, as
    cuTile Python's `order=`): tile axis d has `shape[d]` elements and tile coordinate
    `index[d]` along array axis order[d], so the result is the loaded window of the array with
    its axes permuted by `order` (Tile IR's partition-view dim_map).
    """

    opname = "tile.load"
    effect = Effect.READ

    def __init__(
        self,
        array: Value,
        index: Sequence[Value],
        shape: tuple[int, ...],
        padding: float,
        loc: Location,
        latency: int | None = None,
        allow_tma: bool = True,
        order: tuple[int, ...] | None = None,
    ) -> None:
        assert isinstance(array.type, ArrayParamType)
        hints = _memory_hints(latency, allow_tma)
        if order is not None and order != tuple(range(len(order))):
            assert sorted(order) == list(range(len(shape)))
            hints["order"] = tuple(order)
        super().__init__(
            [array, *index],
            [TileType(array.type.dtype, shape)],
            loc,
            shape=shape,
            padding=padding,
            **hints,
        )


class Store(Op):
    """Write `value` to this block's own tile of a Part; elements outside the array are dropped.
    `latency` and `allow_tma` are tileiras hints, as for Load."""

    opname = "tile.store"
    effect = Effect.WRITE

    def __init__(
        self,
        part: Value,
        value: Value,
        loc: Location,
        latency: int | None = None,
        allow_tma: bool = True,
    ) -> None:
        super().__init__([part, value], [], loc, **_memory_hints(latency, allow_tma))


class StoreAt(Op):
    """Write `value` to tile `index` of a Part: only at an index `part.tiles()` gave this block.
    With `chunk` (a shape dividing the Part's tile), `index` counts chunks of that shape, one
    `part.chunks(chunk)` gave: inside this block's tile. `own`: the index is the block's own
    tile (grouped order, more than 3 axes, a chunk of it), so, like `tile.store`, it is
    disjoint only on the partition's grid (kernel.launch(grid) refuses it). Hints as Store's."""

    opname = "tile.store_at"
    effect = Effect.WRITE

    def __init__(
        self,
        part: Value,
        value: Value,
        index: Sequence[Value],
        loc: Location,
        chunk: tuple[int, ...] | None = None,
        own: bool = False,
        latency: int | None = None,
        allow_tma: bool = True,
    ) -> None:
        attrs: dict[str, Any] = {"chunk": chunk} if chunk is not None else {}
        if own:  # the index derives from the block id: only the partition's grid is disjoint
            attrs["own"] = True
        attrs.update(_memory_hints(latency, allow_tma))
        super().__init__([part, value, *index], [], loc, **attrs)


class Gather(Op):
    """The elements of an array at per-element coordinates: `index` holds one integer tile per
    axis, all of the result's shape. An element whose coordinates fall outside the array, or
    whose `mask` (a bool tile of that shape, when `masked`) is false, reads `padding`."""

    opname = "tile.gather"
    effect = Effect.READ

    def __init__(
        self,
        array: Value,
        index: Sequence[Value],
        mask: Value | None,
        padding: Any,
        loc: Location,
    ) -> None:
        shape = tile_type(index[0]).shape
        at = array.type
        assert isinstance(at, ArrayParamType)
        operands = [array, *index] + ([mask] if mask is not None else [])
        super().__init__(
            operands, [TileType(at.dtype, shape)], loc, padding=padding, masked=mask is not None
        )


class Scatter(Op):
    """Write `value` at per-element coordinates of an `Atomic` array (as Gather reads them);
    elements outside the array or masked off are dropped. Blocks may write one element: a
    relaxed store each, so one of the values lands whole (no torn or undefined result)."""

    opname = "tile.scatter"
    effect = Effect.WRITE

    def __init__(
        self, array: Value, value: Value, index: Sequence[Value], mask: Value | None, loc: Location
    ) -> None:
        operands = [array, value, *index] + ([mask] if mask is not None else [])
        super().__init__(operands, [], loc, masked=mask is not None)


def _ordered(order: str) -> dict[str, str]:
    """An atomic's memory order as its attributes: none for the default acq_rel (so that the
    text of every kernel written before the option is unchanged), else `order=`."""
    return {} if order == "acq_rel" else {"order": order}


class AtomicRMW(Op):
    """Per element, atomically: old = array[coords]; array[coords] = old `mode` value; the
    result is the old values (`mode`: add, max, min, xchg, and, or, xor). Elements outside the
    array or masked off are not touched, and their result is `value`'s element. `order` (the
    attribute absent: acq_rel): relaxed, acquire, release (Tile IR's memory model)."""

    opname = "tile.atomic_rmw"
    effect = Effect.WRITE

    def __init__(
        self,
        array: Value,
        value: Value,
        index: Sequence[Value],
        mask: Value | None,
        mode: str,
        loc: Location,
        order: str = "acq_rel",
    ) -> None:
        operands = [array, value, *index] + ([mask] if mask is not None else [])
        super().__init__(
            operands, [tile_type(value)], loc, mode=mode, masked=mask is not None,
            **_ordered(order),
        )  # fmt: skip


class AtomicStore(Op):
    """Per element of tile `index` of an `Atomic` array (tiles of `value`'s shape, counted as
    `tile.load` counts them), atomically: array = array `mode` value (add, max, min, and, or,
    xor), relaxed at device scope; elements outside the array are dropped. No old values come
    back: Tile IR's `atomic_red_view_tko` on a partition view (cuTile Python's
    `TiledView.atomic_store_<mode>`)."""

    opname = "tile.atomic_store"
    effect = Effect.WRITE

    def __init__(
        self, array: Value, value: Value, index: Sequence[Value], mode: str, loc: Location
    ) -> None:
        super().__init__([array, value, *index], [], loc, mode=mode)


class AtomicCAS(Op):
    """Per element, atomically: old = array[coords]; if old == expected: array[coords] = desired;
    the result is the old values (`expected`'s element where the coordinates are outside);
    `order` as AtomicRMW's."""

    opname = "tile.atomic_cas"
    effect = Effect.WRITE

    def __init__(
        self,
        array: Value,
        expected: Value,
        desired: Value,
        index: Sequence[Value],
        mask: Value | None,
        loc: Location,
        order: str = "acq_rel",
    ) -> None:
        operands = [array, expected, desired, *index] + ([mask] if mask is not None else [])
        super().__init__(
            operands, [tile_type(expected)], loc, masked=mask is not None, **_ordered(order)
        )


class Print(Op):
    """`print(...)`: printf(`format`, scalars...) once per block, ordered with the stores."""

    opname = "tile.print"
    effect = Effect.WRITE

    def __init__(self, fmt: str, args: Sequence[Value], loc: Location) -> None:
        super().__init__(list(args), [], loc, format=fmt)


class Binary(Op):
    """Elementwise `kind`: add sub mul div floordiv mod pow max min and or xor atan2 (equal
    shapes)."""

    opname = "tile.binary"

    def __init__(self, kind: str, a: Value, b: Value, loc: Location, **attrs: Any) -> None:
        # float `div` may carry `rounding` ("approx", "full") and `flush_to_zero` (f32 only:
        # tile.truediv); absent, it is IEEE division rounded to nearest even
        super().__init__([a, b], [a.type], loc, kind=kind, **attrs)


class Compare(Op):
    opname = "tile.compare"

    def __init__(self, pred: str, a: Value, b: Value, loc: Location) -> None:
        t = tile_type(a)
        super().__init__([a, b], [TileType(bool_, t.shape)], loc, pred=pred)


class Unary(Op):
    """Elementwise `kind`: neg not abs exp exp2 log log2 sqrt rsqrt tanh sin cos tan sinh cosh
    floor ceil."""

    opname = "tile.unary"

    def __init__(
        self, kind: str, a: Value, loc: Location, approx: bool = False, flush_to_zero: bool = False
    ) -> None:
        # `approx` (exp, tanh): the hardware's fast approximation; `flush_to_zero` (exp2): subnormal
        # inputs and results become zero. Attributes only when set.
        extra: dict[str, Any] = {"approx": True} if approx else {}
        if flush_to_zero:
            extra["flush_to_zero"] = True
        super().__init__([a], [a.type], loc, kind=kind, **extra)


class _Retyped(Op):
    """`a`'s elements as `dtype`, of a's shape."""

    def __init__(self, a: Value, dtype: DType, loc: Location) -> None:
        super().__init__([a], [TileType(dtype, tile_type(a).shape)], loc, dtype=dtype)


class _Reshaped(Op):
    """`a`'s elements, of a's dtype, in a tile of `shape`."""

    def __init__(self, a: Value, shape: tuple[int, ...], loc: Location) -> None:
        super().__init__([a], [TileType(tile_type(a).dtype, shape)], loc, shape=shape)


class Cast(_Retyped):
    """The values of `a` converted to `dtype`."""

    opname = "tile.cast"


class Bitcast(_Retyped):
    """The bits of `a` read as `dtype`, of the same width."""

    opname = "tile.bitcast"


class Select(Choice):
    """`where(cond, a, b)` with equal shapes."""

    opname = "tile.select"


class Reshape(_Reshaped):
    """The same elements in row-major order."""

    opname = "tile.reshape"


class Broadcast(_Reshaped):
    """Stretch dimensions of extent 1 to `shape` (same rank)."""

    opname = "tile.broadcast"


class Extract(Op):
    """cuTile's `ct.extract`: the (static) sub-tile of `shape` at `index` of `a`, counted in
    units of `shape` (each shape dimension divides a's)."""

    opname = "tile.extract"

    def __init__(
        self, a: Value, index: tuple[int, ...], shape: tuple[int, ...], loc: Location
    ) -> None:
        result = TileType(tile_type(a).dtype, shape)
        super().__init__([a], [result], loc, index=index, shape=shape)


class Cat(Op):
    """cuTile's `ct.cat`: `a` then `b` along `axis` (the other axes equal)."""

    opname = "tile.cat"

    def __init__(self, a: Value, b: Value, axis: int, loc: Location) -> None:
        shape = list(tile_type(a).shape)
        shape[axis] += tile_type(b).shape[axis]
        super().__init__([a, b], [TileType(tile_type(a).dtype, tuple(shape))], loc, axis=axis)


class Permute(Op):
    opname = "tile.permute"

    def __init__(self, a: Value, perm: tuple[int, ...], loc: Location) -> None:
        t = tile_type(a)
        shape = tuple(t.shape[p] for p in perm)
        super().__init__([a], [TileType(t.dtype, shape)], loc, perm=perm)


class Reduce(Op):
    """`kind` (sum, max, min) over `axis`; the axis is removed from the shape."""

    opname = "tile.reduce"

    def __init__(self, kind: str, a: Value, axis: int, loc: Location) -> None:
        t = tile_type(a)
        shape = t.shape[:axis] + t.shape[axis + 1 :]
        super().__init__([a], [TileType(t.dtype, shape)], loc, kind=kind, axis=axis)


class Scan(Op):
    """Inclusive prefix `kind` (sum, prod) along `axis`, from the end when `reverse`; the
    shape is kept."""

    opname = "tile.scan"

    def __init__(self, kind: str, a: Value, axis: int, reverse: bool, loc: Location) -> None:
        super().__init__([a], [a.type], loc, kind=kind, axis=axis, reverse=reverse)


class Mma(Op):
    """`acc + a @ b`: a (M, K), b (K, N), acc (M, N); products accumulate in acc's dtype."""

    opname = "tile.mma"

    def __init__(self, a: Value, b: Value, acc: Value, loc: Location) -> None:
        super().__init__([a, b, acc], [acc.type], loc)


class Iota(Op):
    """[0, 1, ..., n-1] as a 1-d tile."""

    opname = "tile.iota"

    def __init__(self, n: int, dtype: DType, loc: Location) -> None:
        super().__init__([], [TileType(dtype, (n,))], loc, n=n)


class For(Op):
    """`for iv in range(lo, hi, step)` carrying `init` values; results are their final values.

    `body` has arguments (iv, *carried) and ends with a `tile.yield` of the next carried values.
    """

    opname = "tile.for"
    effect = Effect.WRITE  # conservatively: the body may store

    def __init__(
        self, lo: Value, hi: Value, step: Value, init: Sequence[Value], body: Block, loc: Location
    ) -> None:
        super().__init__([lo, hi, step, *init], [v.type for v in init], loc, body=body)

    body = Attr[Block]()


class While(Op):
    """`while cond:` carrying `init` values; results are their values when `cond` is false.

    `cond` and `body` both have the carried values as arguments: `cond` ends with a
    `tile.yield` of one 0-d bool, `body` with a `tile.yield` of the next carried values.
    """

    opname = "tile.while"
    effect = Effect.WRITE  # conservatively: the body may store

    def __init__(self, init: Sequence[Value], cond: Block, body: Block, loc: Location) -> None:
        super().__init__(list(init), [v.type for v in init], loc, cond=cond, body=body)

    cond = Attr[Block]()
    body = Attr[Block]()


class If(Op):
    """`if cond` on a 0-d bool tile; the results are what the branch that ran yields.

    `then_block` and `else_block` have no arguments and each ends with a `tile.yield` of values
    of the result types (the variables either branch assigns that live after the `if`).
    """

    opname = "tile.if"
    effect = Effect.WRITE  # conservatively: a branch may store

    def __init__(
        self,
        cond: Value,
        result_types: Sequence[TileType],
        then_block: Block,
        else_block: Block,
        loc: Location,
    ) -> None:
        super().__init__(
            [cond], list(result_types), loc, then_block=then_block, else_block=else_block
        )

    then_block = Attr[Block]()
    else_block = Attr[Block]()


def regions(op: Op) -> list[Block]:
    """The blocks nested in `op` (a loop's body, an if's two branches), in order."""
    if isinstance(op, For):
        return [op.body]
    if isinstance(op, While):
        return [op.cond, op.body]
    if isinstance(op, If):
        return [op.then_block, op.else_block]
    return []


REGION_ATTRS = ("body", "cond", "then_block", "else_block")  # blocks, not data

# ops whose results are a list (one per carried value or yielded value)
MULTI_RESULT = (For, While, If)


class Yield(Op):
    opname = "tile.yield"
    effect = Effect.CONTROL
    is_terminator = True

    def __init__(self, values: Sequence[Value], loc: Location) -> None:
        super().__init__(values, [], loc)


class Return(Exit):
    opname = "tile.return"
