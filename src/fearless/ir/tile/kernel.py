"""What a Tile specialisation is, as plain data: its parameters, hints and IR.

    TileParam / Signature   one specialisation: each parameter's kind, dtype, tile shape,
                            Const value and divisibility facts (the kernel ABI follows from it)
    TileHints               whole-kernel hints for tileiras
    TileIR                  the tile IR of one specialisation after the passes
    CompiledTile            its bytecode and cubin

The frontend (tile/frontend.py) produces a `TileIR`; the backend (backends/tileir/lower.py), the
simulator (sim/tile/interpreter.py) and the launchers consume it. Nothing here imports a compiler stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ...dtypes import DType
from ...errors import CompileError, Location
from ..core import Function

ParamKind = Literal["part", "tensor", "atomic", "const", "scalar"]


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
    kind: ParamKind
    dtype: DType | None = None
    ndim: int = 0
    tile: tuple[int, ...] | None = None
    value: Any = None
    align: tuple[int, ...] = ()
    group: int = 0  # a Part's grouped order (tile.grouped), 0: row-major (tile/order.py)
    # a scalar annotated `float` or `int`: typed by Python (f64, i64) and weak as a literal is,
    # taking the other operand's dtype where it meets a tile (tile/rules.py)
    weak: bool = False

    @property
    def is_array(self) -> bool:
        return self.kind in ("part", "tensor", "atomic")


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


@dataclass(frozen=True)
class TileHints:
    """Whole-kernel hints for tileiras (`@tile.kernel(num_ctas=..., occupancy=...)`).

    num_ctas:  CTAs per cluster on sm_90+ (1, 2, 4, 8 or 16), which may share loaded tiles.
    occupancy: how many CTAs tileiras should plan to keep resident per multiprocessor (1-32);
               it trades registers per CTA for latency hiding.
    num_worker_warps: warps doing the arithmetic in a warp-specialised CTA (tileiras may add
               warps for memory transfers): 4 or 8 (1-32, powers of two, from bytecode 13.5);
               row kernels with large tiles and many registers are where it pays.
    """

    num_ctas: int | None = None
    occupancy: int | None = None
    num_worker_warps: int | None = None

    def __post_init__(self) -> None:
        if self.num_ctas is not None and (
            isinstance(self.num_ctas, bool) or self.num_ctas not in (1, 2, 4, 8, 16)
        ):
            raise CompileError(
                f"`num_ctas` must be 1, 2, 4, 8 or 16, got {self.num_ctas!r}",
                help="it is the number of CTAs in a cluster, a power of two up to 16",
            )
        if self.occupancy is not None and (
            not isinstance(self.occupancy, int)
            or isinstance(self.occupancy, bool)
            or not 1 <= self.occupancy <= 32
        ):
            raise CompileError(
                f"`occupancy` must be an integer from 1 to 32, got {self.occupancy!r}",
                help="it is the number of CTAs tileiras plans to keep on one multiprocessor",
            )

        if self.num_worker_warps is not None and (
            isinstance(self.num_worker_warps, bool)
            or self.num_worker_warps not in (1, 2, 4, 8, 16, 32)
        ):
            raise CompileError(
                f"`num_worker_warps` must be 1, 2, 4, 8, 16 or 32, got {self.num_worker_warps!r}",
                help="it is the number of warps doing a CTA's arithmetic; 4 and 8 work with "
                "every tileiras",
            )

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.num_ctas, self.occupancy, self.num_worker_warps))


@dataclass
class TileIR:
    """One specialisation's tile IR after the passes: what the backends and the simulator take.

    `source_text` is the kernel's source (part of the cache key: the IR alone omits what
    a comment or a renamed local changes in a diagnostic).
    """

    fn: Function
    signature: Signature
    source_text: str
    hints: TileHints = field(default_factory=TileHints)
    # the kernel's `with tile.unsafe():` statements (inspect reports the kernel unsafe)
    unsafe_regions: tuple[Location, ...] = ()
    # reductions that may take in padding, decided per launch (tile/padding_check.Suspect)
    padded_reductions: tuple[Any, ...] = ()

    @property
    def name(self) -> str:
        return self.fn.name


@dataclass
class CompiledTile:
    name: str
    arch: str
    signature: Signature
    bytecode: bytes
    cubin: bytes
    stages: dict[str, str] = field(default_factory=dict)
