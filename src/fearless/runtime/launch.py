"""The GPU launcher: one `GpuLaunchPlan` per compiled specialisation, and its warm path.

Everything that does not depend on the arguments is done once, when the plan is built: the
module is loaded, the error record allocated, the parameter buffer laid out, the borrow-check
pairs listed, and grid/block pairs are validated once each and remembered. A warm `launch`
then reads each array's pointer, length and dtype through a per-type extractor, compares the
output ranges with the others, packs the values with one `struct.pack_into`, and calls
cuLaunchKernel. No dicts are built and no frames inspected unless an error is being raised.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable, Sequence
from typing import Any

from ..abi import CompiledKernel, ParamSpec
from ..errors import KernelTypeError
from . import driver
from .arrays import describe, torch_dtype
from .borrow import PAIRWISE_MAX, Pairs, borrow_error, find_overlap, output_pairs
from .contract import (
    Dim3,
    Limits,
    check_launch,
    normalize_dims,
    requires_error,
    requires_values,
)
from .device_errors import ErrorPool, default_pool
from .location import user_location
from .params import ParamPacker, bf16_bits, scalar_fits
from .specialise import build_launcher

_PACK_ERRORS = (struct.error, OverflowError, TypeError, ValueError)
_DIM_CACHE_MAX = 256


class GpuLaunchPlan:
    """Launches one compiled kernel on the GPU; build once per CompiledKernel, launch many times.

    `plan.launch(grid, block, args, stream=None)` checks and launches `ck` with `args` (one per
    parameter, in order) on `stream`: None (the legacy default stream), an fl.Stream, a
    torch/CuPy stream, an object with `__cuda_stream__`, or a handle. It is generated for the
    kernel's signature (specialise.py); `plan.launcher_source` shows it.
    """

    launch: Callable[..., None]

    def __init__(self, ck: CompiledKernel, pool: ErrorPool | None = None) -> None:
        self.ck = ck
        self.device = driver.ensure_initialized()
        self.kernel = driver.load_kernel(ck)
        self.pool = pool or default_pool()
        self.slot, record = self.pool.alloc(ck)
        self.packer = ParamPacker(ck.params)
        self.packer.set_error_record(record)
        self.params: tuple[ParamSpec, ...] = ck.params
        arrays = [p for p in ck.params if p.is_array]
        self._array_names = [p.name for p in arrays]
        self._outputs = [p.is_output for p in arrays]
        # (output, other) array pairs to compare; () when nothing is written, None: sweep
        self.borrow_pairs: Pairs | None = (
            output_pairs(self._outputs)
            if len(arrays) <= PAIRWISE_MAX or not any(self._outputs)
            else None
        )
        self.converters = tuple(_converter(p) for p in ck.params)
        # (grid, block) as given -> (grid, block, function, fast function or None,
        # physical grid.x, logical threads)
        self._dims: dict[Any, tuple[Dim3, Dim3, Any, Any, int, int]] = {}
        # Large 1-D launches run the coarsened entry (abi.py) when the module has one: a grid
        # of at least this many blocks still fills every SM after dividing it by `coarsen`.
        self.coarse_min_blocks = ck.coarsen * 8 * max(1, self.device.sm_count)
        info = self.device
        self.limits = Limits(
            info.max_threads_per_block,
            info.max_block_dims,
            info.max_grid_dims,
            self.kernel.max_threads_per_block,
            f"`{ck.name}` uses {self.kernel.num_regs} registers per thread, which allows "
            f"{self.kernel.max_threads_per_block}",
        )
        self._cu = driver.cu()
        self._legacy_stream = self._cu.CUstream(0)
        self.launch, self.launcher_source = build_launcher(self, _PACK_ERRORS)

    # ------------------------------------------------------------------------ grid, block

    def check_dims(self, grid: Any, block: Any) -> tuple[Dim3, Dim3]:
        """Validate a grid/block pair against the contract and the device; remembered once valid."""
        g, b, *_ = self._shape(grid, block)
        return g, b

    def _shape(self, grid: Any, block: Any) -> tuple[Dim3, Dim3, Any, Any, int, int]:
        """Validate a launch and choose how it runs.

        Returns (grid, block, function, fast function, physical grid.x, logical threads); the
        launcher runs the fast function (ck.fast_entry) when the arguments meet its length
        assumptions.
        """
        g = normalize_dims(grid, "grid")
        b = normalize_dims(block, "block")
        check_launch(self.ck.name, self.ck.contract, g, b, self.limits)
        threads = g[0] * g[1] * g[2] * b[0] * b[1] * b[2]
        k = self.kernel
        fn, fast, gx = k.function, k.fast_function, g[0]
        one_d = (g[1], g[2], b[1], b[2]) == (1, 1, 1, 1)
        if k.coarse_function is not None and one_d and gx >= self.coarse_min_blocks:
            fn, fast, gx = k.coarse_function, k.fast_coarse_function, -(-gx // self.ck.coarsen)
        shape = (g, b, fn, fast, gx, threads)
        if len(self._dims) >= _DIM_CACHE_MAX:
            self._dims.clear()
        with contextlib.suppress(TypeError):  # unhashable (a list): validated again next time
            self._dims[grid, block] = shape
        return shape

    # ---------------------------------------------------------------------- error paths

    def _requires_failed(self, k: int, args: Sequence[Any]) -> None:
        lengths = [
            describe(a, "cuda", name=p.name, ndim=p.ndim).shape[0] if p.is_array else None
            for p, a in zip(self.params, args, strict=True)
        ]
        env = requires_values(args, lengths)
        raise requires_error(self.ck.name, self.params, self.ck.contract.requires[k], env)

    def _overlap(self, starts: list[int], ends: list[int]) -> None:
        hit = find_overlap(starts, ends, self._outputs, self.borrow_pairs)
        if hit is not None:
            raise borrow_error(self._array_names, self._outputs, starts, ends, *hit)

    def _argument_error(self, index: int, arg: Any) -> KernelTypeError:
        spec = self.params[index]
        describe(arg, "cuda", name=spec.name, ndim=spec.ndim)  # raises the precise reason
        return KernelTypeError(
            f"argument `{spec.name}` cannot be passed to `{self.ck.name}`",
            user_location(),
            code="E0701",
            help=f"pass a {spec.ndim}-D contiguous GPU array: an fl.Tensor, a torch tensor, "
            "or a DLPack array",
        )

    def _dtype_error(self, index: int, have: Any) -> KernelTypeError:
        spec = self.params[index]
        return KernelTypeError(
            f"argument `{spec.name}` has element type {have}, but `{self.ck.name}` expects {spec.dtype}",
            user_location(),
            code="E0701",
            help=f"convert it first (e.g. `x.to(torch.{_torch_name(spec.dtype.name)})` or "
            f"`fl.asarray(x, dtype=fl.{spec.dtype.name})`)",
        )

    def _torch_dtype_error(self, index: int, t: Any) -> KernelTypeError:
        """A torch tensor whose dtype is not the parameter's (or has no fearless type)."""
        have = torch_dtype(t.dtype)
        if have is None:
            return self._argument_error(index, t)  # describe names the unsupported type
        return self._dtype_error(index, have)

    def _arity_error(self, args: Sequence[Any]) -> KernelTypeError:
        names = ", ".join(p.name for p in self.params)
        return KernelTypeError(
            f"`{self.ck.name}` takes {len(self.params)} arguments ({names}) but {len(args)} were given",
            user_location(),
            code="E0061",
            help=f"pass one argument per parameter: {self.ck.name}({names})",
        )

    def _scalar_error(self, args: Sequence[Any]) -> KernelTypeError:
        for spec, arg in zip(self.params, args, strict=True):
            if not spec.is_array and not scalar_fits(arg, spec.dtype):
                return KernelTypeError(
                    f"argument `{spec.name}` = {arg!r} does not fit the parameter's type {spec.dtype}",
                    user_location(),
                    code="E0701",
                    help=f"pass a value {spec.dtype} can hold (or convert it: `fl.{spec.dtype.name}(x)`)",
                )
        return KernelTypeError(
            f"the arguments of `{self.ck.name}` could not be packed", user_location(), code="E0701"
        )

    def _relaunch(self, err: Any, fn: Any, g: Dim3, b: Dim3, cs: Any) -> None:
        if err == self._cu.CUresult.CUDA_ERROR_INVALID_CONTEXT:  # a thread that never used the GPU
            driver.make_current()
            (err,) = self._cu.cuLaunchKernel(fn, *g, *b, 0, cs, self.packer.address, 0)
            if not err:
                return
        raise driver.driver_error(err, f"launching `{self.ck.name}` with grid={g} block={b}")


def _converter(p: ParamSpec) -> Any:
    """Scalars whose value needs work before packing: bf16 (raw bits) and bool (strict)."""
    if p.is_array:
        return None
    if p.dtype.name == "bf16":
        return lambda v: bf16_bits(float(v))
    if p.dtype.is_bool:
        return _strict_bool
    return None


def _strict_bool(value: Any) -> bool:
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise TypeError("a bool parameter takes True or False")


_TORCH_NAMES = {
    "bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
    "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16", "bf16": "bfloat16",
    "f32": "float32", "f64": "float64",
}  # fmt: skip


def _torch_name(name: str) -> str:
    return _TORCH_NAMES.get(name, name)
