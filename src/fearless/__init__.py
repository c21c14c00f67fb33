"""fearless: memory-safe GPU kernels written in Python (SIMT and Tile tracks)."""

from __future__ import annotations

from . import math, tile
from .autotuning import autotune
from .dtypes import (
    bf16,
    bool_,
    f8e4m3fn,
    f8e5m2,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    tf32,
    u8,
    u16,
    u32,
    u64,
)
from .errors import (
    ArgumentError,
    BorrowError,
    CompileError,
    DeviceError,
    FearlessError,
    FearlessWarning,
    HostCopyWarning,
    KernelIndexError,
    KernelTypeError,
    LaunchContractError,
    MovedError,
    OutOfMemoryError,
    SafetyError,
    ToolchainError,
)
from .runtime.device_errors import synchronize
from .runtime.devices import current_device, device_count, set_device
from .runtime.graphs import CUDAGraph, graph
from .runtime.streams import Stream
from .runtime.target import cuda_status, get_target, set_target
from .runtime.tensor import Tensor, arange, asarray, empty, from_numpy, full, ones, zeros
from .runtime.tensor_like import empty_like, full_like, ones_like, zeros_like
from .version import __version__

__all__ = [
    "ArgumentError",
    "BorrowError",
    "CUDAGraph",
    "CompileError",
    "DeviceError",
    "FearlessError",
    "FearlessWarning",
    "HostCopyWarning",
    "KernelIndexError",
    "KernelTypeError",
    "LaunchContractError",
    "MovedError",
    "OutOfMemoryError",
    "SafetyError",
    "Stream",
    "Tensor",
    "ToolchainError",
    "__version__",
    "arange",
    "asarray",
    "autotune",
    "bf16",
    "bool_",
    "cuda_status",
    "current_device",
    "device_count",
    "empty",
    "empty_like",
    "f8e4m3fn",
    "f8e5m2",
    "f16",
    "f32",
    "f64",
    "from_numpy",
    "full",
    "full_like",
    "get_target",
    "graph",
    "i8",
    "i16",
    "i32",
    "i64",
    "math",
    "ones",
    "ones_like",
    "set_device",
    "set_target",
    "synchronize",
    "tf32",
    "tile",
    "u8",
    "u16",
    "u32",
    "u64",
    "zeros",
    "zeros_like",
]
