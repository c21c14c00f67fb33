import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f64, 2], out: simt.DisjointSlice[fl.f64, 2]):
    v = simt.local.array((1, 2), fl.f32)
    i = simt.thread.block_column(0, 2)
    v[0] = x[i]  # error[E0308] col 5: a chunk copy between `x` (f64) and `v` (f32) would convert its elements
