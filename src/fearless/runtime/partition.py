"""`Partition`: an output tensor moved into disjoint tiles for one or more Tile launches.

`t.partition((BM, BN))` consumes `t` (its handle raises MovedError, naming the line where it
moved, until `unpartition()` gives the tensor back; `with t.partition(...) as tp:` gives it
back at the block's end). A Partition is the moved tensor's one owner: the tensor's move mark
is the partition's own (`_moved_at`, compared by identity), checked and set under one lock, so
two threads never both partition one tensor and only that partition gives the tensor back; a
Partition is never copied (`copy`, `deepcopy`, `pickle`: E0382), and its fields are read-only
(claunch_tile.c reads them by slot offset, so they stay slots). The partition's grid is
ceil(extent / tile) per axis; a kernel taking the partition as a `tile.Part` runs one block per
tile, and block (i, j) may write tile (i, j) only — that is what makes Tile writes race-free.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ..errors import CompileError, KernelTypeError, Location, MovedError
from ..ir.tile.types import is_pow2, row_major_group
from .location import check_not_moved, copy_location, user_location


class Movable(Protocol):
    """What a partition needs of the tensor it moves (`fl.Tensor` is one; tensor.py builds on
    this module, so this module names the protocol instead of the class)."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def dtype(self) -> Any: ...
    @property
    def _moved(self) -> Location | None: ...
    def _check_live(self) -> None: ...
    def _mark_moved(self, where: Location | None) -> None: ...
    def _unmove(self) -> None: ...


_T = TypeVar("_T", bound=Movable)


# Partition's fields that no one may assign or delete after __init__ (`_given_back` changes
# only through `unpartition`)
_READ_ONLY = frozenset(("tensor", "tile", "grid", "group", "_moved_at"))

# Held while a tensor's move state is checked and changed (`partition`, `unpartition`): two
# threads partitioning one tensor cannot both see it live.
_MOVES = threading.Lock()


class Partition(Generic[_T]):
    """A tensor split into tiles of `tile` shape; the owner of its memory until unpartitioned."""

    __slots__ = ("_given_back", "_moved_at", "grid", "group", "tensor", "tile")

    tensor: _T
    tile: tuple[int, ...]
    group: int
    grid: tuple[int, ...]
    _moved_at: Location
    _given_back: Location | None

    def __init__(
        self, tensor: _T, tile: tuple[int, ...], moved_at: Location, group: int = 0
    ) -> None:
        # the slots' own setters: `__setattr__` refuses the read-only fields
        _SET["tensor"](self, tensor)
        _SET["tile"](self, tile)
        _SET["group"](self, group)  # tile.grouped(group) order; ROW_MAJOR; 0: the grid's
        _SET["grid"](self, tuple(math.ceil(e / t) for e, t in zip(tensor.shape, tile, strict=True)))
        _SET["_moved_at"](self, moved_at)  # the tensor's `_moved` while this partition owns it
        _SET["_given_back"](self, None)

    def __setattr__(self, name: str, value: object) -> None:
        if name in _READ_ONLY:
            raise AttributeError(
                f"`Partition.{name}` is read-only: a partition's tensor, tiles and grid are fixed "
                "when it is made (partition the tensor again for other tiles)"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"`Partition.{name}` cannot be deleted")

    def _copy_error(self, how: str) -> MovedError:
        return MovedError(
            f"a Partition cannot be {how}: it is the one owner of its tensor's memory, and a "
            "copy would be a second",
            copy_location(),
            notes=[f"the tensor moved into this partition at {self._moved_at}"],
            help="pass the partition itself; to copy the data, `unpartition()` it and copy the "
            "tensor (`copy.deepcopy(t)`), or partition the tensor again later",
        )

    def __copy__(self) -> Partition[_T]:
        raise self._copy_error("copied")

    def __deepcopy__(self, memo: Any) -> Partition[_T]:
        raise self._copy_error("deep-copied")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise self._copy_error("pickled")

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the whole partitioned tensor."""
        return self.tensor.shape

    @property
    def dtype(self):  # type: ignore[no-untyped-def]
        return self.tensor.dtype

    def check_live(self) -> None:
        check_not_moved(
            self._given_back,
            "use of a partition after `unpartition()` gave its tensor back",
            "unpartitioned at",
            "partition the tensor again for another launch",
        )

    def unpartition(self) -> _T:
        """End the partition and give the tensor back (the only live handle to it)."""
        with _MOVES:
            self.check_live()
            if self.tensor._moved is not self._moved_at:  # not this partition's move
                raise MovedError(
                    "this partition does not own its tensor, so it cannot give it back",
                    user_location(),
                    notes=[f"the tensor moved into this partition at {self._moved_at}"],
                    help="give the tensor back through the partition that owns it",
                )
            _SET["_given_back"](self, user_location() or Location("<unknown>", 0, 0))
            self.tensor._unmove()
        return self.tensor

    @property
    def open(self) -> bool:
        """Whether the partition still owns its tensor (not yet unpartitioned)."""
        return self._given_back is None

    def __enter__(self) -> Partition[_T]:
        """`with z.partition(tile) as zp:` the partition for the block's launches; the block's
        end gives the tensor back (`unpartition()`), also when it raises, so that `z` is
        usable after it."""
        self.check_live()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._given_back is None:  # the block may have given it back itself
            self.unpartition()

    def __repr__(self) -> str:
        state = " (given back)" if self._given_back else ""
        return f"<Partition {self.tensor.shape} into tiles {self.tile}, grid {self.grid}{state}>"


# Partition's slot setters (member descriptors' `__set__`), past its `__setattr__`
_SET: dict[str, Any] = {name: Partition.__dict__[name].__set__ for name in Partition.__slots__}


@dataclass(frozen=True)
class Grouped:
    """`tile.grouped(size)`: a partition's tiles in groups of `size` rows of tiles, column by
    column within a group (tile/order.py), for L2 reuse in GEMMs."""

    size: int


ROW_MAJOR = -1  # Partition.group of `tile.row_major()`


@dataclass(frozen=True)
class RowMajor:
    """`tile.row_major()`: the blocks, in launch order (grid x fastest, then y, then z), take a
    partition's tiles row-major, its last axis fastest (tile/order.py). Blocks that run together
    then take neighbouring tiles of the last axes: in attention, one head's query tiles, which
    share its keys and values in L2 (FlashAttention's and TileGym's grid order). `reverse`: the
    axes whose tiles are numbered from their last (causal attention's query tiles, the longest
    first, as FlashAttention-3 schedules them)."""

    reverse: tuple[int, ...] = ()


def row_major(reverse: Sequence[int] = ()) -> RowMajor:
    """The order `out.partition(tile, order=tile.row_major())` gives a partition's tiles;
    `reverse=(2,)` numbers axis 2's tiles from the last."""
    try:
        axes = tuple(sorted(set(reverse)))
    except TypeError:
        axes = (None,)  # type: ignore[assignment]
    if not all(isinstance(a, int) and not isinstance(a, bool) and 0 <= a < 16 for a in axes):
        raise KernelTypeError(
            f"tile.row_major(reverse=...) takes axes (ints from 0), not {reverse!r}",
            user_location(),
            help="e.g. `tile.row_major(reverse=(2,))` for the third axis",
        )
    return RowMajor(axes)


def grouped(size: int) -> Grouped:
    """The order `out.partition(tile, order=tile.grouped(8))` gives a 2-D partition's tiles."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise KernelTypeError(
            f"tile.grouped takes a positive number of tile rows per group, not {size!r}",
            user_location(),
            help="e.g. `tile.grouped(8)`",
        )
    return Grouped(size)


def partition(
    tensor: _T, shape: int | Sequence[int], order: Grouped | RowMajor | None = None
) -> Partition[_T]:
    """Move `tensor` into a Partition of tiles of `shape` (powers of two, one per dimension),
    its tiles in `order` (by default block (x, y, z) owns tile (x, y, z): tile/order.py)."""
    tensor._check_live()
    loc = user_location()
    if order is not None and not isinstance(order, (Grouped, RowMajor)):
        raise KernelTypeError(
            f"`order=` takes `tile.grouped(n)` or `tile.row_major()`, not `{order!r}`",
            loc,
            help="leave it out for the grid's order, or pass `order=tile.grouped(8)`",
        )
    if isinstance(order, Grouped) and tensor.ndim != 2:
        raise KernelTypeError(
            f"a grouped order needs a 2-D partition, but this tensor has {tensor.ndim} dimensions",
            loc,
            help="group the tiles of a 2-D output (a GEMM's C), or leave `order=` out",
        )
    try:
        tile = (shape,) if isinstance(shape, int) else tuple(shape)
    except TypeError:  # not a sequence: None, a float, a dtype
        tile = ()
    if len(tile) != tensor.ndim or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in tile
    ):
        raise KernelTypeError(
            f"a tensor of shape {tensor.shape} needs a tile shape of {tensor.ndim} ints, got {shape!r}",
            loc,
            help=f"e.g. `.partition({tuple([128] * tensor.ndim) if tensor.ndim > 1 else '(128,)'})`",
        )
    bad = [d for d in tile if not is_pow2(d)]
    if bad:
        raise CompileError(
            f"tile dimensions must be powers of two, but the tile {tile} has {bad[0]}",
            loc,
            label="not a power of two",
            help="round the tile up to a power of two; edge tiles are padded on load and "
            "masked on store",
        )
    if isinstance(order, RowMajor) and any(a >= tensor.ndim for a in order.reverse):
        raise KernelTypeError(
            f"`tile.row_major(reverse={order.reverse})` names an axis past this tensor's "
            f"{tensor.ndim}",
            loc,
            help=f"reverse axes 0 to {tensor.ndim - 1}",
        )
    group = (
        order.size
        if isinstance(order, Grouped)
        else row_major_group(order.reverse)
        if order is not None
        else 0
    )
    mark = loc or Location("<unknown>", 0, 0)  # this partition's own: `unpartition` checks it
    made = Partition(tensor, tile, mark, group)
    with _MOVES:  # checked and marked at once: another thread may be partitioning it too
        tensor._check_live()
        tensor._mark_moved(mark)
    recorders = getattr(_RECORDING, "stack", None)
    if recorders:
        for made_here in recorders:
            made_here.append(made)
    return made


class _Recording(threading.local):
    stack: list[list[Partition[Any]]] | None = None


_RECORDING = _Recording()


def start_recording() -> list[Partition[Any]]:
    """A list that every partition this thread makes from now on is appended to, until
    `stop_recording(list)` (recordings nest). `fl.autotune` gives back what a call left open."""
    made: list[Partition[Any]] = []
    stack = _RECORDING.stack
    if stack is None:
        stack = _RECORDING.stack = []
    stack.append(made)
    return made


def stop_recording(made: list[Partition[Any]]) -> None:
    """End the recording `start_recording` returned as `made`."""
    stack = _RECORDING.stack or []
    for n in range(len(stack) - 1, -1, -1):  # the last one, but by identity in any case
        if stack[n] is made:
            del stack[n]
            return
