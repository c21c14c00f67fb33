"""fearless: memory-safe GPU kernels written in Python (SIMT and Tile tracks)."""

from __future__ import annotations

__version__ = "0.1.0"

from . import math
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

__all__ = [
    "BorrowError",
    "CompileError",
    "FearlessError",
    "KernelIndexError",
    "KernelTypeError",
    "LaunchContractError",
    "MovedError",
    "SafetyError",
    "ToolchainError",
    "__version__",
    "bf16",
    "bool_",
    "f16",
    "f32",
    "f64",
    "i8",
    "i16",
    "i32",
    "i64",
    "math",
    "u8",
    "u16",
    "u32",
    "u64",
]
