"""Launchers of a compiled SIMT kernel: the CUDA one (runtime) and the simulator's.

Both validate the same launch contract and arguments, run the same borrow check, and report
device bounds failures as the same `KernelIndexError`; only where the threads run differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..abi import LaunchContract
from ..errors import LaunchContractError

if TYPE_CHECKING:
    from .api import Kernel

Dim3 = tuple[int, int, int]

# Limits the simulator enforces, the same as a CUDA device of compute capability 9.0.
SIM_MAX_THREADS_PER_BLOCK = 1024
SIM_MAX_BLOCK = (1024, 1024, 64)
SIM_MAX_GRID = (2**31 - 1, 65535, 65535)


class Launcher(Protocol):
    def validate(self, grid: Dim3, block: Dim3) -> None: ...

    def launch(self, grid: Dim3, block: Dim3, args: Sequence[Any], stream: Any) -> None: ...


def normalize_dim(value: Any, what: str) -> Dim3:
    """An int or a 1-3 tuple of ints as (x, y, z); anything else is a LaunchContractError."""
    if isinstance(value, int) and not isinstance(value, bool):
        dims = [value]
    elif isinstance(value, tuple | list) and 1 <= len(value) <= 3:
        dims = list(value)
    else:
        raise LaunchContractError(
            f"the {what} must be an int or a tuple of 1 to 3 ints, not {value!r}",
            help=f"e.g. `{what}=256` or `{what}=(16, 16)`",
        )
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise LaunchContractError(
                f"{what} dimensions must be ints, not {d!r}",
                help="compute the count with `//`, e.g. `(n + 255) // 256`",
            )
        if d <= 0:
            raise LaunchContractError(
                f"{what} dimension {d} is not positive",
                help="a launch needs at least one block of one thread; skip the launch when "
                "there is no work",
            )
    while len(dims) < 3:
        dims.append(1)
    return (dims[0], dims[1], dims[2])


def check_contract(
    name: str,
    contract: LaunchContract,
    grid: Dim3,
    block: Dim3,
    max_threads: int,
    max_block: Dim3,
    max_grid: Dim3,
) -> None:
    """The launch contract and the device's limits, checked before anything runs."""
    threads = block[0] * block[1] * block[2]
    if contract.block is not None and block != contract.block:
        raise LaunchContractError(
            f"`{name}` is declared with block={contract.block} but launched with block={block}",
            help=f"launch with block={contract.block}, or change the kernel's `block=` contract",
        )
    if contract.launch_bounds is not None and threads > contract.launch_bounds:
        raise LaunchContractError(
            f"`{name}` launched with {threads} threads per block, over its "
            f"launch_bounds={contract.launch_bounds}",
            help=f"use at most {contract.launch_bounds} threads per block",
        )
    if threads > max_threads:
        raise LaunchContractError(
            f"{threads} threads per block is over the limit of {max_threads}",
            help=f"use at most {max_threads} threads per block and more blocks",
        )
    for axis, (b, mb) in enumerate(zip(block, max_block, strict=True)):
        if b > mb:
            raise LaunchContractError(f"block dimension {'xyz'[axis]} = {b} is over the limit {mb}")
    for axis, (g, mg) in enumerate(zip(grid, max_grid, strict=True)):
        if g > mg:
            raise LaunchContractError(
                f"grid dimension {'xyz'[axis]} = {g} is over the limit {mg}",
                help="launch fewer, larger blocks or loop inside the kernel",
            )
    if contract.index_dims == 1 and (grid[1], grid[2], block[1], block[2]) != (1, 1, 1, 1):
        raise LaunchContractError(
            f"`{name}` uses simt.thread.index_1d(), which needs a 1-D launch, but the launch is "
            f"grid={grid}, block={block}",
            help="launch with an int grid and block, e.g. `[(n + 255) // 256, 256]`",
        )


class CudaLauncher:
    """The GPU launcher: `runtime.launch.GpuLaunchPlan` does the checks and the launch."""

    def __init__(self, kernel: Kernel) -> None:
        from ..runtime.launch import GpuLaunchPlan

        self.plan = GpuLaunchPlan(kernel.compile())
        self.launch_plan = self.plan.launch

    def validate(self, grid: Dim3, block: Dim3) -> None:
        self.plan.check_dims(grid, block)

    def launch(self, grid: Dim3, block: Dim3, args: Sequence[Any], stream: Any) -> None:
        self.launch_plan(grid, block, args, stream)


def make_launcher(kernel: Kernel, target: str) -> Launcher:
    if target == "sim":
        from ..sim.launch import SimLauncher

        return SimLauncher(kernel)
    return CudaLauncher(kernel)
