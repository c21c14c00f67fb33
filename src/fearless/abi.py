"""The contract between the compilers and the runtime, for both tracks: what a kernel's
parameters are (`ParamSpec`; Tile's `TileParam`, whose `spec()` maps it onto the same
vocabulary; `Declared`, a parameter before any launch, which the dispatcher reads by), what a
compiled kernel looks like (`CompiledKernel`, `CompiledTile`), and the alignment facts a Tile
specialisation holds (`array_align`).

Kernel ABI (SIMT, PTX entry point `CompiledKernel.entry`), parameters in this order:
  - for each `ParamSpec` of kind "slice", "disjoint" or "atomic": a global pointer (u64) to element 0,
    then its length in elements (i64); for a 2-D array (`ndim` 2, C-contiguous, row-major)
    the pointer, then shape[0], then shape[1] (both i64);
  - for each `ParamSpec` of kind "scalar": the value, passed as its dtype (bool as u8);
  - the launch's logical thread count (i64): grid times block, as the user launched it;
  - a u64 pointer to this kernel's device error record (`ERROR_RECORD_WORDS` i64 words);
  - for a cooperative kernel only (`CompiledKernel.cooperative`: it holds a grid sync), last, a
    u64 pointer to the grid barrier's u32 counter, zeroed before each launch (the runtime's
    `runtime/cooperative.py`), which must be made with cuLaunchCooperativeKernel.

A module may also export `CompiledKernel.coarse_entry`, the same kernel running `coarsen`
logical threads per physical thread (logical i = p + k * S for k < coarsen, p the physical
index, S the physical thread count, skipping i >= the logical thread count). The launcher
uses it for large 1-D launches, with a grid of ceil(grid.x / coarsen) blocks. Likewise
`fast_entry` (and `fast_coarse_entry`): the kernel compiled assuming the length relations
`fast_assumes`, chosen at launch when the arguments satisfy them.

Device error record, i64 words: [flag, site, block.x, block.y, block.z, thread.x, thread.y,
thread.z, index, length]. `flag` is 0 until the first failing check wins a compare-and-swap to
1 and fills in the rest; `site` indexes `CompiledKernel.sites`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from .dtypes import DType
from .errors import Location

ParamKind = Literal["slice", "disjoint", "atomic", "scalar"]
Dim3 = tuple[int, int, int]  # a grid or block shape, (x, y, z)

ERROR_RECORD_WORDS = 10
ERROR_RECORD_BYTES = ERROR_RECORD_WORDS * 8


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter as the launcher sees it."""

    name: str
    kind: ParamKind
    dtype: DType
    ndim: int = 1

    @property
    def is_array(self) -> bool:
        return self.kind != "scalar"

    @property
    def is_output(self) -> bool:
        # An AtomicSlice is written too: the borrow check treats it as a DisjointSlice.
        return self.kind in ("disjoint", "atomic")


@dataclass(frozen=True)
class SiteInfo:
    """A device-side check: what it guards and where in the user's code it stands."""

    kind: Literal["read", "write"]
    param: str
    loc: Location
    axis: int | None = None  # the axis a check of a 2-D access guards; None for 1-D arrays
    unsafe: bool = False  # the access stands inside `with simt.unsafe():`


@dataclass(frozen=True)
class Requirement:
    """One `requires=` relation, e.g. "len(c) == len(a)".

    `template` is the relation as a Python expression over the placeholders `__len_<i>` (the
    length of parameter i) and `__arg_<i>` (the value of scalar parameter i), evaluated with
    Python integers, so it never overflows. `relation` is (param, op, param) when the relation
    is between two lengths (the bounds pass uses those), else None.
    """

    text: str
    template: str
    relation: tuple[str, str, str] | None = None


@dataclass(frozen=True)
class LaunchContract:
    """What a launch must satisfy; checked on the host before anything runs."""

    block: tuple[int, int, int] | None = None
    launch_bounds: int | None = None
    index_dims: int = 1
    requires: tuple[Requirement, ...] = ()
    # numba's `max_registers`: ptxas keeps each thread within this many registers (`.maxnreg`)
    max_registers: int | None = None
    # The block must be 1-D: a leader guard `simt.threadIdx.x == 0` (simt/leader.py) is then
    # taken by one thread per block.
    block_1d: bool = False


@dataclass
class CompiledKernel:
    """The output of the SIMT compiler for one specialisation, as stored in the cache."""

    name: str
    entry: str
    params: tuple[ParamSpec, ...]
    sites: tuple[SiteInfo, ...]
    contract: LaunchContract
    arch: str
    ptx: str = ""
    cubin: bytes | None = None
    coarse_entry: str | None = None
    coarsen: int = 1
    # The same kernel compiled assuming `fast_assumes` (relations between lengths), with fewer
    # device checks; the launcher runs it (or its coarsened twin) when they hold.
    fast_entry: str | None = None
    fast_coarse_entry: str | None = None
    fast_assumes: tuple[Requirement, ...] = ()
    stages: dict[str, str] = field(default_factory=dict)
    # The kernel holds `simt.cg.this_grid().sync()`: launched with cuLaunchCooperativeKernel,
    # on a grid the GPU holds at once, with the grid barrier's counter as its last parameter.
    cooperative: bool = False


# ------------------------------------------------------------------------- Tile track
# Tile kernel ABI (the cubin's parameters): per array parameter (part, tensor or atomic)
# of rank d a u64 pointer to element 0, d i32 extents, then d-1 i32 strides in elements;
# per scalar its value; a const has no parameter (TileParam says it in full).

TileParamKind = Literal["part", "tensor", "atomic", "const", "scalar"]
# How the launch's borrow check and host-array staging see a Tile array parameter: a Part is
# this block's exclusive tile of an output (a DisjointSlice's rule), a Tensor is read only.
_ACCESS: dict[str, ParamKind] = {"part": "disjoint", "tensor": "slice", "atomic": "atomic"}


class Declared(NamedTuple):
    """A parameter as its kernel declares it, before any launch: what the runtime's dispatcher
    (runtime/dispatch.py) reads a call's arguments by. `dtype` is None for a Const.
    `optional`: an array parameter a call may pass as None (`tile.Tensor[T] | None`), which
    specialises the kernel without it (`TileParam.absent`)."""

    name: str
    kind: TileParamKind
    dtype: DType | None
    optional: bool = False


@dataclass(frozen=True)
class TileParam:
    """One parameter of one specialisation.

    Kernel ABI (the cubin's parameters), per array parameter ("part", "tensor" or "atomic") of rank d:
    a u64 pointer to element 0, d i32 extents, then d-1 i32 strides in elements (the last
    stride is 1: arrays are C-contiguous); per scalar its value; a const has no parameter.

    `align` (arrays) is what the launch saw of its argument: the power of two, up to 16, that
    divides the pointer in bytes, then per extent and per stride (d-1 of them) the power of two
    up to 16 bytes' worth of elements that divides it (`array_align`). The lowering turns it into
    `assume` ops, which let tileiras use TMA and vector accesses; a launch whose arguments divide
    differently is another specialisation, so the assumptions always hold.
    """

    name: str
    kind: TileParamKind
    dtype: DType | None = None
    ndim: int = 0
    tile: tuple[int, ...] | None = None
    # a Const's value; specialisations compare its `const_key`, in which a float is its bits
    # (0.0 and -0.0 compile apart, a NaN is one value)
    value: Any = field(default=None, compare=False)
    align: tuple[int, ...] = ()
    group: int = 0  # a Part's grouped order (tile.grouped), 0: row-major (tile/order.py)
    # a scalar annotated `float` or `int`: typed by Python (f64, i64) and weak as a literal is,
    # taking the other operand's dtype where it meets a tile (tile/rules.py)
    weak: bool = False
    const_key: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "const_key", _const_key(self.value))

    @property
    def is_array(self) -> bool:
        return self.kind in ("part", "tensor", "atomic")

    @classmethod
    def left_out(cls, name: str) -> TileParam:
        """The optional array `name` that a launch passed as None (`absent`)."""
        return cls(name, "const", None, value=None)

    @property
    def absent(self) -> bool:
        """An optional array the launch passed as None (`left_out`): a Const of value None (a
        `tile.Const` is never None), so it has no kernel parameter, as every Const."""
        return self.kind == "const" and self.value is None

    def spec(self) -> ParamSpec | None:
        """This parameter in the launch's one vocabulary (None: not an array): what the
        borrow check and the host-array staging take for either track."""
        access = _ACCESS.get(self.kind)
        if access is None or self.dtype is None:
            return None
        return ParamSpec(self.name, access, self.dtype, self.ndim)


def _const_key(value: Any) -> Any:
    """What tells two Const values apart: a float by its bits (`==` has 0.0 == -0.0 and
    NaN != NaN), a tuple item by item, anything else by its type and value."""
    if isinstance(value, float):
        return (float, struct.pack("<d", value))
    if isinstance(value, tuple):
        return (tuple, *(_const_key(v) for v in value))
    return (type(value), value)


ALIGN_BYTES = 16  # TMA needs 16-byte aligned addresses and strides


def _pow2_divisor(v: int, cap: int) -> int:
    """The largest power of two up to `cap` that divides `v` (0 is divisible by all)."""
    if v == 0:
        return cap
    return min(cap, v & -v)


def element_strides(shape: Sequence[int]) -> list[int]:
    """The strides in elements of a C-contiguous array, as the kernel ABI passes them."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return strides


def array_align(ptr: int, shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """`TileParam.align` of a C-contiguous array: (pointer, *extents, *strides[:-1])."""
    cap = max(1, ALIGN_BYTES // itemsize)
    return (
        _pow2_divisor(ptr, ALIGN_BYTES),
        *(_pow2_divisor(d, cap) for d in shape),
        *(_pow2_divisor(s, cap) for s in element_strides(shape)[:-1]),
    )


Signature = tuple[TileParam, ...]


@dataclass
class CompiledTile:
    name: str
    arch: str
    signature: Signature
    bytecode: bytes
    cubin: bytes
    stages: dict[str, str] = field(default_factory=dict)
    # why a launch of this cubin could never end (backends/cubin_info.py's never_finishes, read
    # when it was compiled): runtime/tile_gpu.py refuses to launch it; None when it may end
    never_finishes: str | None = None
