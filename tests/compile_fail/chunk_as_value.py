import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    v = simt.local.array((1, 4), fl.f32)
    i = simt.thread.block_column(0, 4)
    v[0, 0] = x[i] + 1.0  # error[E0001] col 15: `x[i]` cannot be used as a value in a kernel
    out[i] = v[0]
