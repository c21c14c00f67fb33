"""fearless: memory-safe GPU kernels written in Python (SIMT and Tile tracks)."""

from __future__ import annotations

__version__ = "0.1.0"

from . import math, tile
from .dtypes import bf16, bool_, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from .errors import (
    BorrowError,
    CompileError,
    FearlessError,
    KernelIndexError,
    KernelTypeError,
    LaunchContractError,
    MovedError,
    SafetyError,
    ToolchainError,
)
from .runtime import (
    Stream,
    Tensor,
    arange,
    asarray,
    cuda_status,
    empty,
    from_numpy,
    full,
    get_target,
    set_target,
    synchronize,
    zeros,
)

__all__ = [
    "BorrowError",
    "CompileError",
    "FearlessError",
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
    "bf16",
    "bool_",
    "cuda_status",
    "empty",
    "f16",
    "f32",
    "f64",
    "from_numpy",
    "full",
    "get_target",
    "i8",
    "i16",
    "i32",
    "i64",
    "math",
    "set_target",
    "synchronize",
    "tile",
    "u8",
    "u16",
    "u32",
    "u64",
    "zeros",
]
