import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    v = simt.local.array((1, 3), fl.f32)
    i = simt.thread.block_column(0, 3)  # error[E0001] col 37: simt.thread.block_column(k, width) takes a constant width of 2, 4 or 8
    v[0] = x[i]
    out[i] = v[0]
