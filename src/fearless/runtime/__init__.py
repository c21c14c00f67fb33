"""The runtime: targets, the CUDA driver, arrays and `fl.Tensor`, streams, launches, device errors.

    target.py         which target runs kernels ("cuda" or "sim"); the GPU probe
    driver.py         device/context (cuda.core), kernel loading, cubin linking, memory, copies
    arrays.py         what an array argument is (`describe`), per-type warm-launch extractors
    tensor.py         `fl.Tensor` and `fl.empty/zeros/full/arange/asarray/from_numpy`
    streams.py        `fl.Stream` and stream handles of torch/CuPy/cuda.core streams
    params.py         kernel parameter buffers for cuLaunchKernel, laid out once per signature
    borrow.py         the launch-time borrow check (outputs overlap nothing), shared with sim
    device_errors.py  device error records -> KernelIndexError; `fl.synchronize`
    launch.py         `GpuLaunchPlan`: one per compiled kernel, and its warm launch path
    location.py       the user's line for launch-time errors

Importing this package imports neither cuda.bindings nor torch; the GPU is touched on first use.
"""

from __future__ import annotations

from .arrays import ArrayInfo, as_dtype, describe
from .borrow import check_borrows
from .device_errors import ErrorPool, format_index_error, synchronize
from .streams import Stream, stream_handle
from .target import cuda_status, current_target, default_arch, get_target, set_target
from .tensor import Tensor, arange, asarray, empty, from_numpy, full, zeros

__all__ = [
    "ArrayInfo",
    "ErrorPool",
    "Stream",
    "Tensor",
    "arange",
    "as_dtype",
    "asarray",
    "check_borrows",
    "cuda_status",
    "current_target",
    "default_arch",
    "describe",
    "empty",
    "format_index_error",
    "from_numpy",
    "full",
    "get_target",
    "set_target",
    "stream_handle",
    "synchronize",
    "zeros",
]
