"""What a Tile specialisation is, as plain data: its parameters, hints and IR.

    TileHints               whole-kernel hints for tileiras
    TileIR                  the tile IR of one specialisation after the passes

A specialisation's parameters (`TileParam`, `Signature`) and what it compiles to
(`CompiledTile`) are the compiler/runtime contract, in abi.py beside SIMT's.

The frontend (tile/frontend.py) produces a `TileIR`; the backend (backends/tileir/lower.py), the
simulator (sim/tile/interpreter.py) and the launchers consume it. Nothing here imports a compiler stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...abi import Signature, TileParam
from ...errors import CompileError, Location
from ...frames import user_location
from ..core import Function, Value


@dataclass(frozen=True)
class TileHints:
    """Whole-kernel hints for tileiras (`@tile.kernel(num_ctas=..., occupancy=...)`).

    num_ctas:  CTAs per cluster on sm_90+ (1, 2, 4, 8 or 16), which may share loaded tiles.
    occupancy: how many CTAs tileiras should plan to keep resident per multiprocessor (1-32);
               it trades registers per CTA for latency hiding.
    num_worker_warps: warps doing the arithmetic in a warp-specialised CTA (tileiras may add
               warps for memory transfers): 4 or 8 (1-32, powers of two, from bytecode 13.5);
               row kernels with large tiles and many registers are where it pays.

    A wrong hint is a CompileError at the user's line (the decorator's or `options(...)`).
    """

    num_ctas: int | None = None
    occupancy: int | None = None
    num_worker_warps: int | None = None

    def __post_init__(self) -> None:
        if self.num_ctas is not None and not _one_of(self.num_ctas, (1, 2, 4, 8, 16)):
            raise CompileError(
                f"`num_ctas` must be 1, 2, 4, 8 or 16, got {self.num_ctas!r}",
                user_location(),
                help="it is the number of CTAs in a cluster, a power of two up to 16",
            )
        if self.occupancy is not None and (
            not isinstance(self.occupancy, int)
            or isinstance(self.occupancy, bool)
            or not 1 <= self.occupancy <= 32
        ):
            raise CompileError(
                f"`occupancy` must be an integer from 1 to 32, got {self.occupancy!r}",
                user_location(),
                help="it is the number of CTAs tileiras plans to keep on one multiprocessor",
            )

        if self.num_worker_warps is not None and not _one_of(
            self.num_worker_warps, (1, 2, 4, 8, 16, 32)
        ):
            raise CompileError(
                f"`num_worker_warps` must be 1, 2, 4, 8, 16 or 32, got {self.num_worker_warps!r}",
                user_location(),
                help="it is the number of warps doing a CTA's arithmetic; 4 and 8 work with "
                "every tileiras",
            )

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.num_ctas, self.occupancy, self.num_worker_warps))


def _one_of(value: object, allowed: tuple[int, ...]) -> bool:
    """Whether a hint is one of `allowed` ints (a bool or an array is none of them)."""
    return isinstance(value, int) and not isinstance(value, bool) and value in allowed


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

    @property
    def runtime_params(self) -> tuple[TileParam, ...]:
        """The signature's parameters that reach the kernel as entry arguments, in their order:
        a const, and an optional array passed as None, are folded in and have none."""
        return tuple(p for p in self.signature if p.kind != "const")

    def param_of(self, arg: Value) -> TileParam:
        """The launch parameter behind entry argument `arg` (its dtype, rank and alignment)."""
        return self.runtime_params[self.fn.params.index(arg)]
