"""Tile-track types: the parameter annotations users write and the IR types of tile values.

Annotations (`tile.Part[fl.f32]`, `tile.Tensor[fl.f32]`, `tile.Const[int]`) say what a kernel
parameter is. In the IR every value is a `TileType` (a scalar is a 0-d tile); a partitioned
output or read-only tensor parameter is an `ArrayParamType`. Both subclass the shared
`ir.core.Type`, so the data model (values, ops, blocks) is the one both tracks use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..dtypes import DType
from ..ir.core import Type, Value


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

    `tile` is the static tile shape of a Part (the partition's), None for a Tensor.
    """

    dtype: DType
    ndim: int
    tile: tuple[int, ...] | None = None

    @property
    def is_part(self) -> bool:
        return self.tile is not None

    def __str__(self) -> str:
        if self.tile is not None:
            return f"Part[{self.dtype.name}, tile={self.tile}]"
        return f"Tensor[{self.dtype.name}, {self.ndim}d]"


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


# ------------------------------------------------------------------------------ annotations


@dataclass(frozen=True)
class PartAnnotation:
    dtype: DType

    def __repr__(self) -> str:
        return f"tile.Part[{self.dtype.name}]"


@dataclass(frozen=True)
class TensorAnnotation:
    dtype: DType

    def __repr__(self) -> str:
        return f"tile.Tensor[{self.dtype.name}]"


@dataclass(frozen=True)
class ConstAnnotation:
    pytype: type

    def __repr__(self) -> str:
        return f"tile.Const[{self.pytype.__name__}]"


class _Subscriptable:
    def __init__(self, name: str, make: Any) -> None:
        self._name = name
        self._make = make

    def __getitem__(self, item: Any) -> Any:
        return self._make(item)

    def __repr__(self) -> str:
        return f"tile.{self._name}"


def _dtype_of(item: Any, what: str) -> DType:
    if not isinstance(item, DType):
        raise TypeError(f"tile.{what}[T] takes a dtype such as fl.f32, not {item!r}")
    return item


def _const_of(item: Any) -> ConstAnnotation:
    if item not in (int, float, bool):
        raise TypeError(f"tile.Const[T] takes int, float or bool, not {item!r}")
    return ConstAnnotation(item)


Part = _Subscriptable("Part", lambda t: PartAnnotation(_dtype_of(t, "Part")))
Tensor = _Subscriptable("Tensor", lambda t: TensorAnnotation(_dtype_of(t, "Tensor")))
Const = _Subscriptable("Const", _const_of)


def is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0
