"""The floats NumPy lacks, for the simulator: bf16, the 8-bit floats and tf32 are held as the
float32 of their values (exact), rounded to their type where an op produces them; bf16 and
fp8 arrays live in memory as their raw bits (`raw_load` / `raw_store`). numerics.py re-exports
these."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes
from ..dtypes import DType

F32 = np.dtype(np.float32)
_U32 = np.uint32


def round_bf16(x: Any) -> Any:
    """float32 values rounded to the nearest bf16 (ties to even), still held as float32."""
    u = np.asarray(x, F32).view(_U32)
    r = (u + (_U32(0x7FFF) + ((u >> _U32(16)) & _U32(1)))) & _U32(0xFFFF0000)
    nan = u & _U32(0x7FFFFFFF) > _U32(0x7F800000)
    if np.any(nan):  # keep NaN a NaN (rounding could carry it into infinity)
        r = np.where(nan, (u | _U32(0x00400000)) & _U32(0xFFFF0000), r)
    return r.view(F32)


def bf16_load(raw: Any) -> Any:
    """16-bit bf16 words (or ml_dtypes bfloat16 values) -> their float32 values."""
    a = np.asarray(raw)
    if a.dtype.name == "bfloat16":
        a = a.view(np.uint16)
    return (a.astype(_U32) << _U32(16)).view(F32)


def bf16_store(x: Any) -> Any:
    """float32 values that are bf16 values -> 16-bit words."""
    return (np.asarray(x, F32).view(_U32) >> _U32(16)).astype(np.uint16)


def round_f8(x: Any, dt: DType) -> Any:
    """Values rounded to the 8-bit float `dt` (nearest even), saturated as the GPU converts
    (PTX's cvt.rn.satfinite, the only rounding it has to an 8-bit float): what rounds past the
    largest finite value, infinity included, is that value with its sign (448 for e4m3fn,
    57344 for e5m2), where ml_dtypes (and torch) give NaN or inf; NaN stays NaN. Still held as
    float32."""
    v = np.asarray(x, F32)
    r = np.asarray(v.astype(dtypes.ml_type(dt)).astype(F32))
    over = ~np.isfinite(r) & ~np.isnan(v)
    if np.any(over):
        r = np.where(over, np.copysign(F32.type(dtypes.float_max(dt)), v), r)
    return r


def round_tf32(x: Any) -> Any:
    """float32 values rounded to tf32's 10-bit mantissa, ties to even, as Tile IR's `ftof` to
    tf32 rounds on the H100 (bench/experiments/tileir_open_numerics.py, 2026-12-07: 1 + 2^-11
    gives 1, where PTX's cvt.rna.tf32.f32 would give 1 + 2^-10), still held as float32; NaN
    and inf stay."""
    u = np.asarray(x, F32).view(_U32)
    r = (u + _U32(0xFFF) + ((u >> _U32(13)) & _U32(1))) & _U32(0xFFFFE000)
    return np.where(np.isfinite(np.asarray(x, F32)), r, u).view(F32)


def round_narrow(x: Any, dt: DType) -> Any:
    """float32 values rounded to the narrow float `dt` (bf16, an 8-bit float or tf32), still
    held as float32."""
    if dt.name == "bf16":
        return round_bf16(x)
    return round_f8(x, dt) if dt.is_f8 else round_tf32(x)


def raw_load(raw: Any, dt: DType) -> Any:
    """Memory words of `dt` -> the values the simulator computes with (bf16 and the 8-bit floats
    as float32; the others as they are)."""
    if dt.is_f8:
        return np.asarray(raw).view(dtypes.ml_type(dt)).astype(F32)
    return bf16_load(raw) if dt.name == "bf16" else raw


def raw_store(x: Any, dt: DType) -> Any:
    """The inverse of `raw_load`."""
    if dt.is_f8:
        return np.asarray(x, F32).astype(dtypes.ml_type(dt)).view(np.uint8)
    return bf16_store(x) if dt.name == "bf16" else x
