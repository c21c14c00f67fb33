"""Tile-track annotations: what users write to say what a kernel parameter is.

`tile.Part[fl.f32]` (this block's tile of a partitioned output), `tile.Tensor[fl.f32]` (a
read-only array), `tile.Atomic[fl.f32]` (an output updated only by atomics and scatters),
`tile.Const[int]` (specialised per value). `tile.Tensor[fl.f32] | None` (and so for Atomic and
Part) is an optional array (`OptionalAnnotation`): a launch that passes None compiles the kernel
without it, the parameter the constant None in the body. An optional Part is an output a launch
may leave out (a training forward's saved statistics): the grid comes from the Parts passed. The
IR types of tile values are in `ir/tile/types.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn

from ..dtypes import DType
from ..errors import KernelTypeError
from ..runtime.location import user_location


@dataclass(frozen=True)
class ArrayAnnotation:
    """An array parameter's annotation: `tile.<kind>[dtype]`."""

    dtype: DType
    kind: ClassVar[str] = ""

    def __repr__(self) -> str:
        return f"tile.{self.kind}[{self.dtype.name}]"

    def __or__(self, other: Any) -> OptionalAnnotation:
        return self._optional(other, f"{self!r} | {other!r}")

    def __ror__(self, other: Any) -> OptionalAnnotation:
        return self._optional(other, f"{other!r} | {self!r}")

    def _optional(self, other: Any, written: str) -> OptionalAnnotation:
        """`X | None`: this annotation, optional (a Tensor's, an Atomic's or a Part's; a launch
        that leaves out every Part has no grid, tile/grid.py's error)."""
        if other is not None and other is not type(None):
            _refuse(
                f"`{written}`: a Tile annotation unites only with None",
                "an optional array is `tile.Tensor[fl.f32] | None` (or tile.Atomic, tile.Part); "
                "a launch that passes None compiles the kernel without it",
            )
        return OptionalAnnotation(self)


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
class OptionalAnnotation:
    """`tile.Tensor[T] | None`, `tile.Atomic[T] | None`: an array parameter a launch may pass
    as None. A None is a compile-time constant (tile/signature.py makes it a Const parameter
    of value None): that specialisation has no such parameter, and the body sees None, so
    `if m is not None:` folds; an array makes the parameter `inner`."""

    inner: ArrayAnnotation

    @property
    def dtype(self) -> DType:
        return self.inner.dtype

    def __repr__(self) -> str:
        return f"{self.inner!r} | None"


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


def _refuse(message: str, help: str) -> NoReturn:
    """A mistake in an annotation, raised where the kernel's `def` evaluates it (E0308)."""
    raise KernelTypeError(message, user_location(), help=help)


def _dtype_of(item: Any, what: str) -> DType:
    if not isinstance(item, DType):
        _refuse(
            f"tile.{what}[T] takes a dtype such as fl.f32, not {item!r}",
            f"write e.g. `tile.{what}[fl.f32]` or `tile.{what}[fl.bf16]`",
        )
    return item


def _const_of(item: Any) -> ConstAnnotation:
    if item not in (int, float, bool):
        _refuse(
            f"tile.Const[T] takes int, float or bool, not {item!r}",
            "write `tile.Const[int]` (tile sizes, counts), `tile.Const[float]` or "
            "`tile.Const[bool]`: a launch specialises the kernel per value",
        )
    return ConstAnnotation(item)


Part = _Subscriptable("Part", lambda t: PartAnnotation(_dtype_of(t, "Part")))
Tensor = _Subscriptable("Tensor", lambda t: TensorAnnotation(_dtype_of(t, "Tensor")))
Atomic = _Subscriptable("Atomic", lambda t: AtomicAnnotation(_dtype_of(t, "Atomic")))
Const = _Subscriptable("Const", _const_of)
