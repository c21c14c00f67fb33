"""NumPy reference of DeepSeek-V3's block-scaled fp8 GEMM (`w8a8_block_fp8_matmul`): TileGym's
torch reference (tests/suites/unsloth/test_fp8.py, `Test_Unsloth_W8A8_FP8_Matmul.reference`)
restated in float64: A and B dequantised block by block, then multiplied; and the inputs of a
case (fp8 operands from ml_dtypes, f32 scales). What tests/test_ops_fp8_block_matmul.py and its
GPU test compare `fearless.ops` with."""

from __future__ import annotations

import ml_dtypes
import numpy as np


def dequantize(q: np.ndarray, scales: np.ndarray, block_rows: int, block_k: int) -> np.ndarray:
    """q (R, K) in float64 times each element's block scale: scales[r // block_rows,
    k // block_k] (the last blocks partial)."""
    rows, k = q.shape
    s = np.repeat(np.repeat(scales.astype(np.float64), block_rows, 0), block_k, 1)
    return q.astype(np.float64) * s[:rows, :k]


def fp8_block_matmul_reference(
    a: np.ndarray, b: np.ndarray, a_s: np.ndarray, b_s: np.ndarray, block_n: int, block_k: int
) -> np.ndarray:
    """(A * As) @ (B * Bs)^T in float64: A (..., K) with As (..., KB) per row and K block, B
    (N, K) with Bs (NB, KB) per (block_n, block_k) block; returns (..., N)."""
    k = a.shape[-1]
    a2 = dequantize(a.reshape(-1, k), a_s.reshape(-1, a_s.shape[-1]), 1, block_k)
    b2 = dequantize(b, b_s, block_n, block_k)
    return (a2 @ b2.T).reshape(*a.shape[:-1], b.shape[0])


def fp8_block_inputs(
    lead: tuple[int, ...],
    n: int,
    k: int,
    block_n: int,
    block_k: int,
    seed: int = 0,
    fp8: type = ml_dtypes.float8_e4m3fn,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, As, Bs): A (*lead, K) and B (N, K) quantized to `fp8` from normals spread over
    its range (past a few units, so that rounding differs from element to element), scales
    uniform in [0.01, 0.05) (as vLLM's test: they keep the products in bf16's range)."""
    rng = np.random.default_rng(seed)
    kb, nb = -(-k // block_k), -(-n // block_n)
    a = (rng.standard_normal((*lead, k)) * 8).astype(fp8)
    b = (rng.standard_normal((n, k)) * 8).astype(fp8)
    a_s = rng.uniform(0.01, 0.05, (*lead, kb)).astype(np.float32)
    b_s = rng.uniform(0.01, 0.05, (nb, kb)).astype(np.float32)
    return a, b, a_s, b_s
