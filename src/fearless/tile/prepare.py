"""The slow path of a Tile launch: from a call's arguments to the launch the dispatcher keeps.

`prepare_launch` runs once per argument key (runtime/dispatch.py's `specialise` callback):
it reads the arguments into a Signature, takes the grid from the Partitions (or the host's,
for `kernel.launch(grid, ...)`), runs the borrow check (no read-only argument may share a byte
with a partitioned output), builds or takes the specialisation's IR, warns about reductions
over padding these extents leave, and prepares the run: the simulator's runner
(sim/tile/interpreter.py) on "sim", the compiled launch (runtime/tile_gpu.py) on "cuda".
"""

from __future__ import annotations

from typing import Any, Protocol

from ..abi import CompiledTile, Signature
from ..runtime.borrow import check_borrows
from ..runtime.dispatch import Prepared
from ..runtime.target import Target
from ..runtime.tile_gpu import dynamic_values
from ..runtime.tile_gpu import prepare as prepare_gpu
from ..sim.tile.interpreter import runner as sim_runner
from .grid import partition_grid
from .padding_check import warn_at_launch
from .persistent import check_host_grid_launch


class Launching(Protocol):
    """What the slow path asks of the kernel (tile/kernel.py's Kernel)."""

    name: str
    hints: Any  # its TileHints: num_ctas for the launch
    compiles: Any  # its Compiles (tile/compiles.py): the loaded modules in `.gpu`

    def signature_of(self, args: tuple[Any, ...], target: Target) -> tuple[Signature, list[Any]]:
        """The call's Signature and the values read for it."""
        ...

    def ir_for(self, signature: Signature) -> Any:
        """The specialisation's TileIR."""
        ...

    def compile(self, signature: Signature, arch: str | None = None) -> CompiledTile:
        """The specialisation's cubin."""
        ...


def prepare_launch(
    kernel: Launching,
    args: tuple[Any, ...],
    target: Target,
    host_grid: tuple[int, int, int] | None = None,
) -> tuple[Prepared, list[Any]]:
    """Every check, from the arguments themselves, then the launch prepared for them and its
    payload (runtime/dispatch.py: what a warm launch with the same key reuses)."""
    signature, values = kernel.signature_of(args, target)
    # a host grid: each Part walks its own tiles (`part.tiles()`), so theirs may differ
    grid = host_grid or partition_grid(kernel.name, signature, values)
    device = borrow_check(signature, values)
    ir = kernel.ir_for(signature)
    if host_grid is not None:
        check_host_grid_launch(kernel.name, ir)
    infos = [
        v[1] if p.kind == "part" else v
        for p, v in zip(signature, values, strict=True)
        if p.is_array
    ]
    warn_at_launch(ir, signature, values)  # reductions over padding these extents leave
    # per declared array, absent ones included (0 bytes: the dispatcher's borrow check
    # indexes the declared arrays, runtime/arg_keys.py)
    infos_left = iter(infos)
    nbytes = tuple(
        0 if p.absent else next(infos_left).nbytes for p in signature if p.is_array or p.absent
    )
    if target.simulated:
        return Prepared(signature, ir, grid, nbytes, sim_runner(ir, grid, device)), values
    ct = kernel.compile(signature)
    shapes = [info.shape for info in infos]
    gpu = prepare_gpu(ct, kernel.compiles.gpu, kernel.hints.num_ctas, grid, shapes)
    return Prepared(signature, ir, grid, nbytes, gpu), dynamic_values(signature, values)


def borrow_check(signature: Signature, values: list[Any]) -> int:
    """The launch's borrow check (runtime/borrow.py) over its array arguments: a Part is
    written, a Tensor read; returns their device."""
    specs, infos = [], []
    for p, v in zip(signature, values, strict=True):
        spec = p.spec()  # the launch's one vocabulary: a Part is written, a Tensor read
        if spec is not None:
            specs.append(spec)
            infos.append(v[1] if p.kind == "part" else v)
    return check_borrows(specs, infos)
