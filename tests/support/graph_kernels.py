"""SIMT kernels the graph-capture tests launch: shared by tests/test_graphs.py and
tests/gpu/test_torch_gpu.py."""

from __future__ import annotations

import fearless as fl
from fearless import simt, tile


@simt.kernel
def axpy(a: fl.f32, x: simt.Slice[fl.f32], y: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = a * x[i] + y[i]


@simt.kernel
def shifted(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = x[i + 1]


@tile.kernel
def double(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.load_like(x, out) * 2.0)
