"""Kernels used only by the SIMT benchmarks: safe/unsafe pairs and an 8-array launch."""

from __future__ import annotations

import fearless as fl
from fearless import simt
from fearless_bench.kernels_simt import sum8  # noqa: F401 - the suite's 8-array kernel


@simt.kernel(block=256, requires=("len(a) == len(c)", "len(b) == len(c)"))
def vecadd_contract(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    """Safe, with the lengths in the contract: every check is proven and removed."""
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i] + b[i]


@simt.kernel(block=256, unsafe=True)
def vecadd_unsafe(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i] + b[i]


@simt.kernel(block=256)
def stencil(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    """out[i] = x[i-1] + x[i] + x[i+1] in the interior: the reads keep their device checks."""
    i = simt.thread.index_1d()
    n = len(out)
    if i >= 1 and i < n - 1:
        j = int(i)
        out[i] = x[j - 1] + x[j] + x[j + 1]


@simt.kernel(block=256, unsafe=True)
def stencil_unsafe(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    n = len(out)
    if i >= 1 and i < n - 1:
        j = int(i)
        out[i] = x[j - 1] + x[j] + x[j + 1]
