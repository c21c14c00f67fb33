"""SIMT kernels that read thread and block coordinates, and the coordinates expected: shared by
tests/test_simt_coords.py and tests/gpu/test_simt_coords_gpu.py."""

from __future__ import annotations

import numpy as np

import fearless as fl
from fearless import simt


@simt.kernel
def coords_3d(out: simt.DisjointSlice[fl.i64, 2]):
    """Row = the thread's linear position in the grid, columns = its raw coordinates."""
    bx = simt.blockDim.x
    by = simt.blockDim.y
    t = simt.threadIdx.x + bx * (simt.threadIdx.y + by * simt.threadIdx.z)
    b = simt.blockIdx.x + simt.gridDim.x * simt.blockIdx.y
    row = b * (bx * by * simt.blockDim.z) + t
    gx, gy = simt.grid(2)
    sx, sy = simt.gridsize(2)
    with simt.unsafe():
        out[row, 0] = simt.threadIdx.z * 100 + simt.threadIdx.y * 10 + simt.threadIdx.x
        out[row, 1] = simt.laneid
        out[row, 2] = gy * sx + gx
        out[row, 3] = sx * sy + simt.gridsize(1) * 0 + simt.warpsize * 0
        out[row, 4] = simt.grid(1) - gx


@simt.kernel
def strided_sum(x: simt.Slice[fl.f64], n: int, out: simt.DisjointSlice[fl.f64]):
    """out[i] = x[i] + i for the first n elements (n may exceed len(out): then it fails)."""
    for i in simt.thread.grid_stride(n):
        out[i] = x[i] + float(int(i))


@simt.kernel
def lazy_arm(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    """Only the chosen arm is evaluated: x is shorter than out."""
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = x[i] * 2.0 if i < len(x) else -1.0


@simt.kernel
def clamp(x: simt.Slice[fl.f32], lo: float, hi: float, out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = min(max(x[i], lo), hi)


@simt.kernel
def python_math(scale: float, k: int, out: simt.DisjointSlice[fl.f32]):
    """Weak values combine as Python's numbers (f64) and adopt f32 only at the store."""
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = scale * k / 3.0 + abs(-scale) if k > 0 else -scale


def _expected_coords(grid: tuple[int, int], block: tuple[int, int, int]) -> np.ndarray:
    rows = []
    for by in range(grid[1]):
        for bx in range(grid[0]):
            for tz in range(block[2]):
                for ty in range(block[1]):
                    for tx in range(block[0]):
                        lin = tx + block[0] * (ty + block[1] * tz)
                        gx, gy = bx * block[0] + tx, by * block[1] + ty
                        sx, sy = grid[0] * block[0], grid[1] * block[1]
                        rows.append([tz * 100 + ty * 10 + tx, lin % 32, gy * sx + gx, sx * sy, 0])
    return np.array(rows, np.int64)
