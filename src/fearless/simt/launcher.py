"""Launchers of a compiled SIMT kernel: the CUDA one (runtime) and the simulator's.

Both validate the same launch contract and arguments, run the same borrow check, and report
device bounds failures as the same `KernelIndexError`; only where the threads run differs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..runtime.contract import Dim3

if TYPE_CHECKING:
    from .api import Kernel


class Launcher(Protocol):
    def validate(self, grid: Dim3, block: Dim3) -> None: ...

    def launch(self, grid: Dim3, block: Dim3, args: Sequence[Any], stream: Any) -> None: ...


class CudaLauncher:
    """The GPU launcher: `runtime.launch.GpuLaunchPlan` does the checks and the launch."""

    def __init__(self, kernel: Kernel) -> None:
        from ..runtime.launch import GpuLaunchPlan

        self.plan = GpuLaunchPlan(kernel.compile())
        # The plan's generated launcher itself, so a launch costs no extra call.
        self.launch: Callable[[Any, Any, Sequence[Any], Any], None] = self.plan.launch

    def validate(self, grid: Dim3, block: Dim3) -> None:
        self.plan.check_dims(grid, block)


def make_launcher(kernel: Kernel, target: str) -> Launcher:
    if target == "sim":
        from ..sim.launch import SimLauncher

        return SimLauncher(kernel)
    return CudaLauncher(kernel)
