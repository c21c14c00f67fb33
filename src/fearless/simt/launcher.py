"""Launchers of a compiled SIMT kernel: the CUDA one (runtime) and the simulator's.

Both validate the same launch contract and arguments, run the same borrow check, and report
device bounds failures as the same `KernelIndexError`; only where the threads run differs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..abi import CompiledKernel
from ..runtime import claunch
from ..runtime.contract import Dim3
from ..runtime.launch import GpuLaunchPlan
from ..runtime.target import Target
from ..sim.launch import SimLauncher
from .compiler import CompiledIR


class Launcher(Protocol):
    def validate(self, grid: Dim3, block: Dim3) -> None: ...

    def launch(self, grid: Dim3, block: Dim3, args: Sequence[Any], stream: Any) -> None: ...

    def prepared(self, grid: Dim3, block: Dim3) -> Callable[[tuple[Any, ...]], int] | None: ...


class CudaLauncher:
    """The GPU launcher: `runtime.launch.GpuLaunchPlan` does the checks and the launch."""

    def __init__(self, ck: CompiledKernel) -> None:
        self.plan = GpuLaunchPlan(ck)
        # The plan's generated launcher itself, so a launch costs no extra call.
        self.launch: Callable[[Any, Any, Sequence[Any], Any], None] = self.plan.launch

    def validate(self, grid: Dim3, block: Dim3) -> None:
        self.plan.check_dims(grid, block)

    def prepared(self, grid: Dim3, block: Dim3) -> Callable[[tuple[Any, ...]], int] | None:
        return self.plan.prepared(grid, block)


def make_launcher(
    target: Target,
    name: str,
    compiled_ir: Callable[[], CompiledIR],
    compile: Callable[[], CompiledKernel],
) -> Launcher:
    """The launcher for `target`: the simulator runs the IR, the GPU the compiled kernel."""
    if target.simulated:
        ir = compiled_ir()
        fast = (ir.fast.fn, ir.fast.assumes) if ir.fast is not None else None
        return SimLauncher(name, ir.fn, ir.params, ir.contract, ir.ck_for_sim(), fast)
    claunch.prefetch()  # the compiled launcher builds while the kernel compiles
    return CudaLauncher(compile())
