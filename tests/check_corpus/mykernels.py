"""Kernels the other corpus files import (`from mykernels import ...`); clean itself."""

import fearless as fl
from fearless import simt, tile


@simt.kernel(block=256)
def vecadd(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = a[i] + b[i]


@simt.kernel
def saxpy(
    alpha: fl.f32, x: simt.Slice[fl.f32], y: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]
):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = alpha * x[i] + y[i]


@simt.kernel
def casts(
    x: simt.Slice[fl.f32], out_i: simt.DisjointSlice[fl.i32], out_u: simt.DisjointSlice[fl.u32]
):
    i = simt.thread.index_1d()
    if i < len(out_i):
        out_i[i] = fl.i32(x[i])
        out_u[i] = fl.u32(fl.i32(x[i]))


@tile.kernel
def add(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) + tile.load_like(y, z))


def not_a_kernel(a, b, c):
    return a, b, c
