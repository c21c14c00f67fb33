"""Scalar types and the promotion rules of both tracks, in one place.

A `DType` is an immutable value object: `fl.f32` in user code, the element type of arrays and
the type of scalar IR values. Promotion is deliberately strict (DESIGN section 2): two strong
types of different kinds or widths never mix silently; literals are *weak* and adopt the type
of the other operand (`weak_adopt`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class DType:
    """A scalar type: `kind` is 'b' (bool), 'i' (signed), 'u' (unsigned) or 'f' (float)."""

    name: str
    kind: str
    bits: int

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def is_signed(self) -> bool:
        return self.kind == "i"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def np(self) -> np.dtype[Any]:
        """The NumPy dtype holding this type (bf16 and the 8-bit floats are stored as their raw
        bits: NumPy has no such types)."""
        return _NUMPY[self.name]

    @property
    def is_raw(self) -> bool:
        """A float NumPy lacks (bf16, f8e4m3fn, f8e5m2): stored as raw bits; ml_dtypes has it
        (`RAW_FLOATS` names its type)."""
        return self.name in RAW_FLOATS

    @property
    def is_f8(self) -> bool:
        """An 8-bit float: it loads, stores, converts (`astype`) and feeds `tile.mma`, nothing
        else (the tensor cores' fp8; Tile track only)."""
        return self.kind == "f" and self.bits == 8

    @property
    def mma_only(self) -> bool:
        """A tensor-core input type: a tile of it converts and feeds `tile.mma`, no arithmetic
        (the 8-bit floats, which also load and store, and tf32, which has no memory form)."""
        return self.is_f8 or self.name == "tf32"

    def __call__(self, value: Any) -> Any:
        """Host-side conversion: `fl.f32(1.5)` is a NumPy scalar of that type."""
        if self.is_raw:
            raise TypeError(f"fl.{self.name} has no host scalar; use it as an array dtype")
        return self.np.type(value)

    def __repr__(self) -> str:
        return f"fl.{self.name}"

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # Unpickle (a compiled kernel from the disk cache) to the one instance of each type:
        # launchers compare dtypes by identity.
        return (by_name, (self.name,))

    def __str__(self) -> str:
        return self.name


bool_ = DType("bool", "b", 8)
# The integers are named by their kind and width.
i8, i16, i32, i64 = (DType(f"i{bits}", "i", bits) for bits in (8, 16, 32, 64))
u8, u16, u32, u64 = (DType(f"u{bits}", "u", bits) for bits in (8, 16, 32, 64))
f16 = DType("f16", "f", 16)
bf16 = DType("bf16", "f", 16)
f32 = DType("f32", "f", 32)
f64 = DType("f64", "f", 64)
# The 8-bit floats of Hopper's tensor cores (torch's and ml_dtypes' float8_e4m3fn, float8_e5m2)
f8e4m3fn = DType("f8e4m3fn", "f", 8)
f8e5m2 = DType("f8e5m2", "f", 8)
# TensorFloat-32 (cuTile's ct.tfloat32): f32 with a 10-bit mantissa, the tensor cores' f32 input;
# a tile type only (`x.astype(fl.tf32)` before `tile.mma`), held as f32 by the simulator
tf32 = DType("tf32", "f", 32)

ALL: tuple[DType, ...] = (
    bool_, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, f8e4m3fn, f8e5m2, tf32,
)  # fmt: skip
BY_NAME: dict[str, DType] = {t.name: t for t in ALL}
# The floats NumPy lacks, by the name of their ml_dtypes (and torch) type, and back.
RAW_FLOATS = {"bf16": "bfloat16", "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}
BY_ML_NAME: dict[str, DType] = {ml: BY_NAME[name] for name, ml in RAW_FLOATS.items()}

# The NumPy dtype of each type is its kind and byte width ("i4", "f2", "b1"), except those
# NumPy lacks: their raw bits ("u2" for bf16, "u1" for the 8-bit floats).
_NUMPY = {
    t.name: np.dtype(f"u{t.itemsize}" if t.name in RAW_FLOATS else f"{t.kind}{t.itemsize}")
    for t in ALL
}
_FROM_NUMPY = {
    v: BY_NAME[name] for name, v in _NUMPY.items() if name not in RAW_FLOATS and name != "tf32"
}

# Types a weak literal materialises as when nothing else decides (DESIGN section 2).
DEFAULT_INT = i64
DEFAULT_FLOAT = f32


def ml_type(dt: DType) -> Any:
    """ml_dtypes' NumPy type for a float NumPy lacks (JAX's; a dependency of fearless, loaded
    at first use)."""
    import ml_dtypes

    return getattr(ml_dtypes, RAW_FLOATS[dt.name])


def by_name(name: str) -> DType:
    """The dtype called `name` ("f32", "bf16", ...)."""
    return BY_NAME[name]


def from_numpy(dtype: Any) -> DType:
    """The DType of a NumPy dtype; raises KeyError for types fearless has no name for."""
    return _FROM_NUMPY[np.dtype(dtype)]


def from_python_type(t: Any) -> DType | None:
    """`int`, `float` and `bool` annotations: Python's own widths (i64, f64, bool)."""
    return {int: i64, float: f64, bool: bool_}.get(t)


# The smallest magnitude that rounds to infinity in each float type (its largest finite value
# plus half an ulp): a finite literal at or above it would silently become inf, which fearless
# refuses as rustc's overflowing_literals does.
_FLOAT_OVERFLOW = {
    "f8e4m3fn": 464.0,  # no infinity: past 448 it is NaN
    "f8e5m2": 61440.0,
    "f16": 65520.0,
    "bf16": 3.3961775292304730e38,
    "f32": 3.4028236692093846e38,
}


def float_max(dtype: DType) -> float:
    """The largest finite value of a float dtype."""
    return {
        "f8e4m3fn": 448.0,
        "f8e5m2": 57344.0,
        "f16": 65504.0,
        "bf16": 3.3895313892515355e38,
        "f32": 3.4028234663852886e38,
    }.get(dtype.name, 1.7976931348623157e308)


def literal_fits(value: bool | int | float, dtype: DType) -> bool:
    """Whether a weak literal can take `dtype` without changing its value or kind (a finite
    number that would round to inf does not fit)."""
    if isinstance(value, bool):
        return dtype.is_bool
    if isinstance(value, int):
        if dtype.is_float:
            return abs(value) < _FLOAT_OVERFLOW.get(dtype.name, float("inf"))
        if not dtype.is_int:
            return False
        lo, hi = int_range(dtype)
        return lo <= value <= hi
    if not dtype.is_float:
        return False
    return not math.isfinite(value) or abs(value) < _FLOAT_OVERFLOW.get(dtype.name, math.inf)


def int_range(dtype: DType) -> tuple[int, int]:
    if dtype.is_signed:
        return -(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1
    return 0, (1 << dtype.bits) - 1


def literal_default(value: bool | int | float) -> DType:
    """The type a weak literal takes when it stands alone (the SIMT track's: Python's int is
    i64)."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return DEFAULT_INT
    return DEFAULT_FLOAT


def tile_literal_default(value: bool | int | float) -> DType:
    """The Tile track's, cuTile Python's: an int literal that stands alone is i32 when i32
    holds it (else i64); the others as `literal_default`."""
    if isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31:
        return i32
    return literal_default(value)
