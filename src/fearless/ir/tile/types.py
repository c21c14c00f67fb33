"""The tile IR's types: `TileType` (every value is a tile; a scalar is a 0-d tile) and
`ArrayParamType` (a partitioned output `Part`, a read-only `Tensor` or an `Atomic` output).

Both subclass the shared `ir.core.Type`, so the data model (values, ops, blocks) is the one both
tracks use. The annotations users write (`tile.Part[fl.f32]`, ...) are the Tile track's
(`tile/types.py`); this module is what the compiler, the backends and the simulator share.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import DType
from ..core import Type, Value


@dataclass(frozen=True)
class TileType(Type):
    """A tile of `dtype` with a static `shape` (powers of two); shape () is a scalar."""

    dtype: DType
    shape: tuple[int, ...] = ()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        dims = "x".join(str(d) for d in self.shape)
        return f"tile<{dims + 'x' if dims else ''}{self.dtype.name}>"


@dataclass(frozen=True)
class ArrayParamType(Type):
    """A global-memory array parameter: a `Part` (this block's tile of an output) or a `Tensor`.

    `tile` is the static tile shape of a Part (the partition's), None for a Tensor; `group`
    the partition's grouped order (`tile.grouped(group)`, tile/order.py), negative for
    `tile.row_major(reverse=...)` (`row_major_group`), 0 for the grid's order.
    """

    dtype: DType
    ndim: int
    tile: tuple[int, ...] | None = None
    group: int = 0
    atomic: bool = False  # a `tile.Atomic` output: atomics and scatters only (tile/indexed.py)

    @property
    def is_part(self) -> bool:
        return self.tile is not None

    def __str__(self) -> str:
        if self.tile is not None:
            back = reversed_axes(self.group) if self.group < 0 else ()
            row_major = f", row_major(reverse={back})" if back else ", row_major"
            grouped = (
                row_major if self.group < 0 else f", grouped={self.group}" if self.group else ""
            )
            return f"Part[{self.dtype.name}, tile={self.tile}{grouped}]"
        kind = "Atomic" if self.atomic else "Tensor"
        return f"{kind}[{self.dtype.name}, {self.ndim}d]"


def scalar(dtype: DType) -> TileType:
    return TileType(dtype, ())


def tile_type(v: Value) -> TileType:
    """`v`'s type where the IR guarantees a tile (op operands and results, carried values)."""
    assert isinstance(v.type, TileType), f"{v} is not a tile"
    return v.type


def array_type(v: Value) -> ArrayParamType:
    """`v`'s type where the IR guarantees an array parameter (loads, stores, `tile.dim`)."""
    assert isinstance(v.type, ArrayParamType), f"{v} is not an array parameter"
    return v.type


def is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def row_major_group(reverse: tuple[int, ...]) -> int:
    """`ArrayParamType.group` of `tile.row_major(reverse=...)`: -1 - 2 * (the mask of the
    axes whose tiles are numbered from their last), so -1 for plain row-major order."""
    return -1 - 2 * sum(1 << a for a in set(reverse))


def reversed_axes(group: int) -> tuple[int, ...]:
    """The axes a row-major `group` (negative) numbers from their last tile."""
    mask = (-group - 1) // 2
    return tuple(a for a in range(mask.bit_length()) if mask >> a & 1)
