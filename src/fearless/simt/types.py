"""The SIMT track's annotation types and in-kernel namespaces.

`Slice[T]` and `DisjointSlice[T]` (1-D), `Slice[T, 2]` and `DisjointSlice[T, 2]` (2-D,
row-major) are used only as parameter annotations; subscripting them gives an
`ArrayAnnotation` the frontend turns into an IR `ArrayType`. `thread` is the namespace behind
`simt.thread.index_1d()` and `simt.thread.index_2d()`; calling them outside a kernel is an
error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from ..dtypes import DType
from ..errors import FearlessError
from ..frontend.source import FunctionSource, load_source, resolve_annotations


@dataclass(frozen=True)
class ArrayAnnotation:
    dtype: DType
    disjoint: bool
    ndim: int = 1

    def __repr__(self) -> str:
        kind = "DisjointSlice" if self.disjoint else "Slice"
        rank = f", {self.ndim}" if self.ndim != 1 else ""
        return f"simt.{kind}[{self.dtype!r}{rank}]"


class _ArrayKind:
    def __init__(self, disjoint: bool) -> None:
        self.disjoint = disjoint

    def __getitem__(self, key: Any) -> ArrayAnnotation:
        kind = "DisjointSlice" if self.disjoint else "Slice"
        dtype, ndim = key if isinstance(key, tuple) and len(key) == 2 else (key, 1)
        if not isinstance(dtype, DType):
            raise TypeError(
                f"simt.{kind}[...] takes a fearless dtype such as fl.f32, not {dtype!r}"
            )
        if isinstance(ndim, bool) or ndim not in (1, 2):
            raise TypeError(f"simt.{kind}[{dtype!r}, ndim] takes ndim 1 or 2, not {ndim!r}")
        return ArrayAnnotation(dtype, self.disjoint, ndim)

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

    def index_2d(self) -> Any:
        _only_in_kernels("index_2d")

    def __repr__(self) -> str:
        return "simt.thread"


thread = _Thread()


class DeviceFunction:
    """A helper callable from kernels (`@simt.device`); inlined at each call site."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.name: str = func.__name__
        self._src: FunctionSource | None = None
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    def source(self) -> FunctionSource:
        if self._src is None:
            self._src = load_source(self.func)
        return self._src

    def annotations(self) -> dict[str, Any]:
        return resolve_annotations(self.func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise FearlessError(
            f"device function `{self.name}` can only be called from a kernel",
            help="call it inside a @simt.kernel, or call the undecorated function on the host",
        )

    def __repr__(self) -> str:
        return f"<simt.device {self.name}>"
