"""The simulator's launcher: the same checks as a GPU launch, then the IR interpreter.

Arguments are validated exactly as on the GPU (count, dtypes, contiguity, the borrow check,
the launch contract with the limits of a compute-capability-9.0 device); a failed device
check becomes the same `KernelIndexError` the GPU path raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..abi import ParamSpec
from ..errors import KernelTypeError
from ..runtime.arrays import ArrayInfo, describe
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
from ..runtime.device_errors import format_index_error
from ..runtime.location import user_location
from ..runtime.params import scalar_fits
from .simt import SimKernel

if TYPE_CHECKING:
    from ..simt.api import Kernel


class SimLauncher:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.ir = kernel.compiled_ir()
        self.ck = self.ir.ck_for_sim()
        self.params = self.ir.params
        self.sim = SimKernel(self.ir.fn)  # planned once, run per launch
        # As on the GPU: the variant compiled under length assumptions runs when they hold.
        fast = self.ir.fast
        self.fast = (SimKernel(fast.fn), fast.assumes) if fast is not None else None

    def validate(self, grid: Dim3, block: Dim3) -> None:
        check_launch(self.kernel.name, self.ir.contract, grid, block, SIM_LIMITS)

    def launch(self, grid: Any, block: Any, args: Sequence[Any], stream: Any) -> None:
        grid, block = normalize_dims(grid, "grid"), normalize_dims(block, "block")
        self.validate(grid, block)
        values = bind_args(self.kernel.name, self.params, args, "sim")
        # `len(a)` in a `requires=` relation is the extent along axis 0, as in the kernel
        lengths = [v.shape[0] if isinstance(v, ArrayInfo) else None for v in values]
        check_requires(self.kernel.name, self.params, self.ir.contract.requires, args, lengths)
        infos = [v for v in values if isinstance(v, ArrayInfo)]
        arrays = [p for p in self.params if p.is_array]
        check_borrows(arrays, infos)
        runtime_args = [v.host if isinstance(v, ArrayInfo) else v for v in values]
        sim = self.sim
        if self.fast is not None and holds(self.fast[1], requires_values(args, lengths)):
            sim = self.fast[0]
        err = sim.run(grid, block, runtime_args)
        if err is not None:
            raise format_index_error(self.ck, err.record_words())


def bind_args(
    name: str, params: Sequence[ParamSpec], args: Sequence[Any], target: str
) -> list[ArrayInfo | Any]:
    """Check the arguments of one launch against the kernel's parameters."""
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise KernelTypeError(
            f"`{name}` takes {len(params)} argument{'s' if len(params) != 1 else ''} "
            f"({names}) but {len(args)} were given",
            user_location(),
            code="E0061",
        )
    out: list[ArrayInfo | Any] = []
    for p, a in zip(params, args, strict=True):
        if p.is_array:
            info = describe(a, target, name=p.name, ndim=p.ndim)
            if info.dtype != p.dtype:
                raise KernelTypeError(
                    f"argument `{p.name}` has elements of {info.dtype.name}, but the kernel "
                    f"takes {p.dtype.name}",
                    user_location(),
                    code="E0701",
                    help=f"pass {p.dtype.name} data: convert a NumPy array with "
                    f"`x.astype(np.{p.dtype.np.name})`, or build it as `fl.asarray(x, dtype=fl.{p.dtype.name})`",
                )
            out.append(info)
        else:
            if not scalar_fits(a, p.dtype):
                raise KernelTypeError(
                    f"argument `{p.name}` is {a!r}, which is not a {p.dtype.name}",
                    user_location(),
                    code="E0701",
                    help=f"pass a value that fits {p.dtype.name}",
                )
            if p.dtype.name == "bf16":
                out.append(float(a))  # the simulator reads bf16 scalars by value
            else:
                out.append(np.asarray(a).astype(p.dtype.np)[()])
    return out
