"""The SIMT track's annotation types and in-kernel namespaces.

`Slice[T]` and `DisjointSlice[T]` are used only as parameter annotations; subscripting them
gives an `ArrayAnnotation` the frontend turns into an IR `ArrayType`. `thread` is the
namespace behind `simt.thread.index_1d()`; calling it outside a kernel is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NoReturn

from ..dtypes import DType


@dataclass(frozen=True)
class ArrayAnnotation:
    dtype: DType
    disjoint: bool

    def __repr__(self) -> str:
        kind = "DisjointSlice" if self.disjoint else "Slice"
        return f"simt.{kind}[{self.dtype!r}]"


class _ArrayKind:
    def __init__(self, disjoint: bool) -> None:
        self.disjoint = disjoint

    def __getitem__(self, dtype: Any) -> ArrayAnnotation:
        if not isinstance(dtype, DType):
            kind = "DisjointSlice" if self.disjoint else "Slice"
            raise TypeError(
                f"simt.{kind}[...] takes a fearless dtype such as fl.f32, not {dtype!r}"
            )
        return ArrayAnnotation(dtype, self.disjoint)

    def __repr__(self) -> str:
        return "simt.DisjointSlice" if self.disjoint else "simt.Slice"


Slice = _ArrayKind(disjoint=False)
DisjointSlice = _ArrayKind(disjoint=True)


def _only_in_kernels(name: str) -> NoReturn:
    raise RuntimeError(f"simt.thread.{name}() can only be called inside a @simt.kernel")


class _Thread:
    """`simt.thread`: thread-position intrinsics, meaningful only inside kernels."""

    def index_1d(self) -> Any:
        _only_in_kernels("index_1d")

    def __repr__(self) -> str:
        return "simt.thread"


thread = _Thread()
