"""The simulator's launcher: the same checks as a GPU launch, then the IR interpreter.

Arguments are validated exactly as on the GPU (count, dtypes, contiguity, the borrow check,
the stream, the launch contract with the limits of a compute-capability-9.0 device, and for
a cooperative kernel a grid that a pretend H200 holds at once: `runtime/cooperative.py`), and a
launch of more threads than the simulator runs is refused (`simt.check_thread_count`); a failed
device check becomes the same `KernelIndexError` the GPU path raises. The stream then orders
nothing: each launch runs to completion before `launch` returns (inside `fl.graph`, a launch
the capture takes is recorded for the replays instead: runtime/graphs.py). A CPU torch tensor the launch
wrote has its autograd version bumped after the run, as an in-place torch op's is (a backward
that saved it then refuses it; the GPU launchers do not do this: docs/design.md 1.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..abi import CompiledKernel, LaunchContract, ParamSpec, Requirement
from ..ir.core import Function
from ..runtime.arrays import ArrayInfo, bump_versions, torch_written
from ..runtime.binder import bind_args
from ..runtime.borrow import check_borrows
from ..runtime.contract import (
    SIM_LIMITS,
    Dim3,
    check_launch,
    check_requires,
    holds,
    normalize_dims,
    requires_values,
)
from ..runtime.cooperative import check_co_resident, sim_co_resident
from ..runtime.device_errors import format_index_error
from ..runtime.graphs import sim_recording
from ..runtime.streams import captured, check_stream, keep_if_captured, refuse_in_sim_capture
from ..runtime.target import Target
from .simt import SimKernel, check_thread_count


class SimLauncher:
    """Runs one compiled SIMT kernel (its IR after the passes) on the simulator.

    `fast` is the variant compiled under length assumptions, with them: as on the GPU, it runs
    when they hold.
    """

    def __init__(
        self,
        name: str,
        fn: Function,
        params: tuple[ParamSpec, ...],
        contract: LaunchContract,
        ck: CompiledKernel,
        fast: tuple[Function, tuple[Requirement, ...]] | None,
    ) -> None:
        self.name = name
        self.contract = contract
        self.ck = ck
        self.params = params
        self.sim = SimKernel(fn)  # planned once, run per launch
        self.fast = (SimKernel(fast[0]), fast[1]) if fast is not None else None

    def validate(self, grid: Dim3, block: Dim3) -> None:
        check_launch(self.name, self.contract, grid, block, SIM_LIMITS)
        if self.sim.cooperative:  # all blocks at once, as the GPU's occupancy allows
            check_co_resident(self.name, grid, block, *sim_co_resident(block))
        check_thread_count(self.name, grid, block)

    def prepared(self, grid: Dim3, block: Dim3) -> None:
        """No compiled launch here: a prepared launch goes through `launch`."""
        return None

    def launch(self, grid: Any, block: Any, args: Sequence[Any], stream: Any) -> None:
        grid, block = normalize_dims(grid, "grid"), normalize_dims(block, "block")
        self.validate(grid, block)
        values = bind_args(self.name, self.params, args, Target.SIM)
        # `len(a)` in a `requires=` relation is the extent along axis 0, as in the kernel
        lengths = [v.shape[0] if isinstance(v, ArrayInfo) else None for v in values]
        check_requires(self.name, self.params, self.contract.requires, args, lengths)
        infos = [v for v in values if isinstance(v, ArrayInfo)]
        arrays = [p for p in self.params if p.is_array]
        device = check_borrows(arrays, infos)
        if stream is not None:  # read last, as the GPU launch reads the handle
            # host arrays alone have no device: the launch runs on its stream's
            on_device = any(i.device is not None for i in infos)
            check_stream(stream, device if on_device else None)
        runtime_args = [v.host if isinstance(v, ArrayInfo) else v for v in values]
        sim = self.sim
        if self.fast is not None and holds(self.fast[1], requires_values(args, lengths)):
            sim = self.fast[0]
        written = [
            t
            for p, v in zip(self.params, values, strict=True)
            if p.is_output
            and isinstance(v, ArrayInfo)
            and (t := torch_written(v.owner)) is not None
        ]
        recording = sim_recording()
        # inside `fl.graph`: run at each replay, checked now (a launch on another stream than
        # the capture's runs now, as on the GPU)
        if recording is not None and captured(stream):
            for spec, v in zip(self.params, values, strict=True):
                if isinstance(v, ArrayInfo) and isinstance(v.owner, np.ndarray):
                    refuse_in_sim_capture(f"copying NumPy array `{spec.name}` to the GPU")
            keep_if_captured(args, stream)  # the replay checks that none has moved since
            recording.append(lambda: self._run(sim, grid, block, runtime_args, written))
            return
        self._run(sim, grid, block, runtime_args, written)

    def _run(
        self, sim: SimKernel, grid: Dim3, block: Dim3, runtime_args: list[Any], written: list[Any]
    ) -> None:
        err = sim.run(grid, block, runtime_args)
        if written:  # torch's memory, written behind autograd's back: as an in-place op would
            bump_versions(written)
        if err is not None:
            raise format_index_error(self.ck, err.record_words())
