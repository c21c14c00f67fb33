"""fearless: memory-safe GPU kernels written in Python (SIMT and Tile tracks)."""

from __future__ import annotations

from . import math, tile
from .autotuning import autotune
from .dtypes import bf16, bool_, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from .errors import (
    BorrowError,
    CompileError,
    FearlessError,
    FearlessWarning,
    HostCopyWarning,
    KernelIndexError,
    KernelTypeError,
    LaunchContractError,
    MovedError,
    SafetyError,
    ToolchainError,
)
from .runtime.device_errors import synchronize
from .runtime.graphs import CUDAGraph, graph
from .runtime.streams import Stream
from .runtime.target import cuda_status, get_target, set_target
from .runtime.tensor import (
    Tensor,
    arange,
    asarray,
    empty,
    empty_like,
    from_numpy,
    full,
    full_like,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from .version import __version__

__all__ = [
    "BorrowError",
    "CUDAGraph",
    "CompileError",
    "FearlessError",
    "FearlessWarning",
    "HostCopyWarning",
    "KernelIndexError",
    "KernelTypeError",
    "LaunchContractError",
    "MovedError",
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
    "empty",
    "empty_like",
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
    "set_target",
    "synchronize",
    "tile",
    "u8",
    "u16",
    "u32",
    "u64",
    "zeros",
    "zeros_like",
]
