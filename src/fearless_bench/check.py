"""Correctness before timing: relative error against a float64 reference, per-dtype thresholds.

Every implementation writes into an output poisoned with NaN, on freshly drawn random inputs,
and passes when ‖out − ref‖ / ‖ref‖ (in float64) is under its dtype's threshold. NaN never
passes, so an element the kernel did not write fails the check. Thresholds follow METHOD.md:
float32 arithmetic lands far under 1e-3; f16 outputs carry 2^-11 rounding, bf16 2^-8.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# fp8 outputs carry 2^-4 (e4m3fn) and 2^-3 (e5m2) rounding
THRESHOLDS = {"f32": 1e-4, "f16": 2e-3, "bf16": 1e-2, "f8e4m3fn": 8e-2, "f8e5m2": 1.5e-1}


def threshold(dtype: str) -> float:
    return THRESHOLDS[dtype]


def rel_err_torch(out: Any, ref: Any) -> float:
    """‖out − ref‖ / ‖ref‖ of torch tensors, computed in float64 where they live."""
    diff = out.double().reshape(-1) - ref.double().reshape(-1)
    den = float(ref.double().norm())
    num = float(diff.norm())
    return num / den if den else num


def rel_err_numpy(out: np.ndarray, ref: np.ndarray) -> float:
    o = np.asarray(out, dtype=np.float64).reshape(-1)
    r = np.asarray(ref, dtype=np.float64).reshape(-1)
    den = float(np.linalg.norm(r))
    num = float(np.linalg.norm(o - r))
    return num / den if den else num


def verdict(err: float, dtype: str, unwritten: int = 0) -> str | None:
    """None when the result passes, else the reason it fails, in words."""
    if unwritten:
        return f"{unwritten} output elements were not written (still NaN)"
    if math.isnan(err) or math.isinf(err):
        return f"relative error is {err} (NaN or inf in the output)"
    limit = threshold(dtype)
    if err > limit:
        return f"relative error {err:.3g} exceeds {limit:g} for {dtype}"
    return None


def count_nan_torch(out: Any) -> int:
    return int(out.isnan().sum())


def bf16_to_f32(values: np.ndarray) -> np.ndarray:
    """bf16 values (ml_dtypes' bfloat16, as `Tensor.numpy()` gives them, or raw uint16 bits)
    as float32 values."""
    a = np.asarray(values)
    if a.dtype.name == "bfloat16":
        return a.astype(np.float32)
    return (a.astype(np.uint16).astype(np.uint32) << 16).view(np.float32)
