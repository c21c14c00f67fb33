"""Kernels of issue 33's first hour that the GPU tests run beside NumPy: numba's shared-memory
histogram (atomics on a shared array between barriers), one partial per block through
`simt.thread.block_id()`, and a module-level NumPy table read as a constant array."""

from __future__ import annotations

import numpy as np

import fearless as fl
from fearless import simt

NBINS = 64  # one thread per bin: blocks of NBINS threads
LUT = np.array([0.0, 0.5, 1.0, 0.25, -2.0, 8.0, 3.5, 1e-3], dtype=np.float32)


@simt.kernel
def shared_histogram(x: simt.Slice[fl.i32], hist_out: simt.AtomicSlice[fl.i32]):
    s = simt.shared.array((NBINS,), fl.i32)
    j = simt.thread.block_index_1d()
    s[j] = 0
    simt.syncthreads()
    for i in range(simt.grid(1), len(x), simt.gridsize(1)):
        simt.atomic.add(s, x[i], 1)
    simt.syncthreads()
    simt.atomic.add(hist_out, j, s[j])


@simt.kernel
def block_sums(x: simt.Slice[fl.f32], partial: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    v = x[int(i)] if i < len(x) else fl.f32(0.0)
    total = simt.block.reduce(v, "sum")
    if simt.thread.block_index_1d() == 0:
        partial[simt.thread.block_id()] = total


@simt.kernel
def lookup(x: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = LUT[x[i]]
