import fearless as fl
from fearless import simt


@simt.kernel
def kernel(n: float, x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    for i in simt.thread.block_stride(n):  # error[E0308] col 39: simt.thread.block_stride() needs an integer stop
        out[i] = x[i]
