"""Tile-track annotations: what users write to say what a kernel parameter is.

`tile.Part[fl.f32]` (this block's tile of a partitioned output), `tile.Tensor[fl.f32]` (a
read-only array), `tile.Atomic[fl.f32]` (an output updated only by atomics and scatters),
`tile.Const[int]` (specialised per value). The IR types of tile values are in
`ir/tile/types.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ..dtypes import DType


@dataclass(frozen=True)
class ArrayAnnotation:
    """An array parameter's annotation: `tile.<kind>[dtype]`."""

    dtype: DType
    kind: ClassVar[str] = ""

    def __repr__(self) -> str:
        return f"tile.{self.kind}[{self.dtype.name}]"


class PartAnnotation(ArrayAnnotation):
    """`tile.Part[T]`: this block's tile of a partitioned output."""

    kind = "Part"


class TensorAnnotation(ArrayAnnotation):
    """`tile.Tensor[T]`: a read-only array."""

    kind = "Tensor"


class AtomicAnnotation(ArrayAnnotation):
    """`tile.Atomic[T]`: an output array that blocks update only through atomics
    (`tile.atomic_add`, ...) and `tile.scatter`, so any block may touch any element."""

    kind = "Atomic"


@dataclass(frozen=True)
class ConstAnnotation:
    pytype: type

    def __repr__(self) -> str:
        return f"tile.Const[{self.pytype.__name__}]"


@dataclass(frozen=True)
class _Subscriptable:
    """`tile.Part`, `tile.Tensor`, `tile.Atomic`, `tile.Const`: `X[item]` is `make(item)`."""

    name: str
    make: Callable[[Any], Any]

    def __getitem__(self, item: Any) -> Any:
        return self.make(item)

    def __repr__(self) -> str:
        return f"tile.{self.name}"


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
Atomic = _Subscriptable("Atomic", lambda t: AtomicAnnotation(_dtype_of(t, "Atomic")))
Const = _Subscriptable("Const", _const_of)
