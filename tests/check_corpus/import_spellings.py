"""Kernels declared with every spelling of the decorator, SIMT and Tile."""

import fearless as fl
import fearless.simt as s
from fearless import tile
from fearless.simt import DisjointSlice, Slice, kernel


@kernel
def copy(src: Slice[fl.f32], dst: DisjointSlice[fl.f32]):
    i = s.thread.index_1d()
    if i < len(dst):
        dst[i] = src[i]


@s.kernel(block=128)
def scale(k: fl.f32, src: "s.Slice[fl.f32]", dst: "s.DisjointSlice[fl.f32]"):
    i = s.thread.index_1d()
    if i < len(dst):
        dst[i] = k * src[i]


@tile.kernel
def add(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) + tile.load_like(y, z))


a = fl.zeros(1024, dtype=fl.f32)
copy[4, 256](a, a)  # error[E0502] col 17: cannot borrow `a` as mutable
scale[8, 128](2.0, a, a)  # error[E0502] col 23: cannot borrow `a` as mutable
zp = fl.empty(1024, dtype=fl.f32).partition((128,))
add(zp, zp, a)  # error[E0502] col 5: cannot borrow `zp` as mutable
add.launch((8,), zp, a, zp)  # error[E0502] col 18: cannot borrow `zp` as mutable
add(zp, a, a)
