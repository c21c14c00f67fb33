"""The SIMT track's annotation types and in-kernel namespaces.

`Slice[T]` and `DisjointSlice[T]` (1-D), `Slice[T, 2]` and `DisjointSlice[T, 2]` (2-D,
row-major) are used only as parameter annotations; subscripting them gives an
`ArrayAnnotation` the frontend turns into an IR `ArrayType`. `AtomicSlice[T]` and
`AtomicSlice[T, 2]` (T one of `ATOMIC_DTYPES`) are outputs written only through `simt.atomic`. `thread` is the namespace
behind `simt.thread.index_1d()` and `simt.thread.index_2d()`, `atomic` the one behind
`simt.atomic.add(...)` and its siblings; calling them outside a kernel is an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from ..dtypes import DType
from ..errors import FearlessError
from ..frontend.source import FunctionSource, load_source, resolve_annotations
from ..runtime.location import kernel_only

# The element types an AtomicSlice may hold: what the GPU updates atomically in one instruction
# (f16 and bf16 only add; the others also max, min, exch, and the integers cas).
ATOMIC_DTYPES = frozenset(("i32", "u32", "i64", "u64", "f32", "f64", "f16", "bf16"))


@dataclass(frozen=True)
class ArrayAnnotation:
    dtype: DType
    disjoint: bool
    ndim: int = 1
    atomic: bool = False

    @property
    def kind(self) -> str:
        return "AtomicSlice" if self.atomic else "DisjointSlice" if self.disjoint else "Slice"

    def __repr__(self) -> str:
        rank = f", {self.ndim}" if self.ndim != 1 else ""
        return f"simt.{self.kind}[{self.dtype!r}{rank}]"


class _ArrayKind:
    def __init__(self, disjoint: bool, atomic: bool = False) -> None:
        self.disjoint = disjoint
        self.atomic = atomic
        self.kind = "AtomicSlice" if atomic else "DisjointSlice" if disjoint else "Slice"

    def __getitem__(self, key: Any) -> ArrayAnnotation:
        kind = self.kind
        dtype, ndim = key if isinstance(key, tuple) and len(key) == 2 else (key, 1)
        if not isinstance(dtype, DType):
            raise TypeError(
                f"simt.{kind}[...] takes a fearless dtype such as fl.f32, not {dtype!r}"
            )
        if self.atomic and dtype.name not in ATOMIC_DTYPES:
            names = ", ".join(f"fl.{n}" for n in sorted(ATOMIC_DTYPES))
            raise TypeError(f"simt.AtomicSlice[...] holds one of {names}, not {dtype!r}")
        if isinstance(ndim, bool) or ndim not in (1, 2):
            raise TypeError(f"simt.{kind}[{dtype!r}, ndim] takes ndim 1 or 2, not {ndim!r}")
        return ArrayAnnotation(dtype, self.disjoint, ndim, self.atomic)

    def __repr__(self) -> str:
        return f"simt.{self.kind}"


Slice = _ArrayKind(disjoint=False)
DisjointSlice = _ArrayKind(disjoint=True)
AtomicSlice = _ArrayKind(disjoint=False, atomic=True)


SIMT_HOST_HELP = (
    "simt.thread, simt.warp, simt.shared and simt.cg speak for one thread of a launch: call "
    "them in a @simt.kernel body, and launch it (`kernel[grid, block](...)`); on the host, use "
    "NumPy"
)


def host_call(what: str, verb: str = "called") -> NoReturn:
    """E0605: `what` (e.g. "simt.grid()") used on the host, at the user's line."""
    raise kernel_only(f"`{what}`", "@simt.kernel", SIMT_HOST_HELP, verb)


def _only_in_kernels(name: str) -> NoReturn:
    host_call(f"simt.thread.{name}()")


class _Thread:
    """`simt.thread`: thread-position intrinsics, meaningful only inside kernels."""

    def index_1d(self) -> Any:
        _only_in_kernels("index_1d")

    def block_index_1d(self) -> Any:
        """The thread's linear position in its block: opens `simt.shared.array`s."""
        _only_in_kernels("block_index_1d")

    def block_id(self) -> Any:
        """The block's linear index in the grid (`blockIdx.x` in a 1-D grid), a plain int.
        `out[b]` with `b = simt.thread.block_id()` opens this block's element of a 1-D
        DisjointSlice under a leader guard, `if simt.thread.block_index_1d() == 0:` (or
        `simt.threadIdx.x == 0`, which makes the launch's block 1-D): one value per block."""
        _only_in_kernels("block_id")

    def block_index_2d(self, k: Any = 0) -> Any:
        """(row, col) of the thread in its block: opens 2-D `simt.shared.array`s as `s[t]`.
        With a step k: the thread's k-th row of its block's tile, (row + k * R, col), R the
        block's row count (`simt.blockDim.y`); each is the thread's own slot."""
        _only_in_kernels("block_index_2d")

    def tile_index_2d(self, k: Any, rows: int) -> Any:
        """Step k of the thread over its block's tile of `rows` rows (a constant): the 2-D
        index (by * rows + r + k * R, bx * B + c) for the thread (r, c) of a block of R rows
        and B columns at (bx, by), as `block_index_2d(k)` is in the block. Block (bx, by)
        owns rows by * rows ..< (by + 1) * rows of its B columns, so `out[i]` opens a 2-D
        DisjointSlice; a step past the tile (r + k * R >= rows) names a row past any array.
        One `rows` per kernel, not with `index_2d()` or `block_stride`."""
        _only_in_kernels("tile_index_2d")

    def index_2d(self) -> Any:
        _only_in_kernels("index_2d")

    def grid_stride(self, n: Any) -> Any:
        """`for i in simt.thread.grid_stride(n)`: this thread's indices t, t + G, ... below n
        (G the launch's thread count), each a ThreadIndex."""
        _only_in_kernels("grid_stride")

    def block_stride(self, n: Any) -> Any:
        """`for i in simt.thread.block_stride(n)`: one row per block. Each i is the 2-D index
        (b, c), b the block's linear index in the grid (`blockIdx.x` in a 1-D grid) and c this
        thread's columns t, t + T, ... below n (t its position in the block, T the block's
        thread count): `out[i]` opens a 2-D DisjointSlice, `i.row` and `i.col` are plain ints."""
        _only_in_kernels("block_stride")

    def block_column(self, k: Any, width: int = 1) -> Any:
        """Step k of `block_stride` on its own: the 2-D index (b, t + k * T) of this thread's
        k-th column of its block's row. With `for k in range(K)` of constant K the loop
        unrolls, so `simt.local.array` values indexed by k stay in registers.

        With a constant `width` W (2, 4 or 8): (b, W * (t + k * T)), the first column of the
        thread's k-th chunk of W columns, which it owns whole; it moves the chunk as one
        access between the array and a row of a 2-D local array: `v[k] = x[i]`,
        `out[i] = v[k]` (and `g[k] = w[i]` reads a 1-D array's same columns)."""
        _only_in_kernels("block_column")

    def __repr__(self) -> str:
        return "simt.thread"


thread = _Thread()


def _atomic_only_in_kernels(name: str) -> NoReturn:
    host_call(f"simt.atomic.{name}()")


def _rmw(name: str, doc: str) -> Any:
    """The host stub of `simt.atomic.<name>(ary, idx, val)` (simt/atomics.py lowers it)."""

    def stub(self: Any, ary: Any, idx: Any, val: Any) -> Any:
        _atomic_only_in_kernels(name)

    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = f"{doc} Returns the element's old value."
    return stub


class _Atomic:
    """`simt.atomic`: read-modify-write of one element of an `AtomicSlice`, numba's names.

    Each returns the element's old value; the index is any integer (a pair `(row, col)` on a
    2-D AtomicSlice), checked against the length of each axis. `and_`, `or_` and `xor` take
    integer elements; `inc` and `dec` (wrapping counters) u32 and u64.
    `sub` of floats adds the negation; `max`/`min` of floats are `math.fmax`/`fmin` (a NaN
    loses); `cas(ary, idx, old, val)` stores `val` when the element equals `old` bit for bit.
    """

    add = _rmw("add", "Add `val`.")
    sub = _rmw("sub", "Subtract `val` (floats: add its negation).")
    max = _rmw("max", "The maximum of the element and `val`.")
    min = _rmw("min", "The minimum of the element and `val`.")
    exch = _rmw("exch", "Store `val`.")
    and_ = _rmw("and_", "Bitwise and (integer elements).")
    or_ = _rmw("or_", "Bitwise or (integer elements).")
    xor = _rmw("xor", "Bitwise xor (integer elements).")
    inc = _rmw("inc", "numba's inc: 0 if the element was >= val, else it + 1 (u32, u64).")
    dec = _rmw("dec", "numba's dec: val if the element was 0 or > val, else it - 1 (u32, u64).")

    def cas(self, ary: Any, idx: Any, old: Any, val: Any) -> Any:
        _atomic_only_in_kernels("cas")

    def __repr__(self) -> str:
        return "simt.atomic"


atomic = _Atomic()


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
        from ..runtime.location import user_location

        raise FearlessError(
            f"device function `{self.name}` can only be called from a kernel",
            user_location(),
            code="E0605",
            help=f"call it inside a @simt.kernel, or call `{self.name}.func(...)` (the "
            "undecorated Python function) on the host",
        )

    def __repr__(self) -> str:
        return f"<simt.device {self.name}>"
