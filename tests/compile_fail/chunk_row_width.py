import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    v = simt.local.array((1, 8), fl.f32)
    i = simt.thread.block_column(0, 4)
    v[0] = x[i]  # error[E0001] col 5: a chunk of 4 does not fit a row of `v`, which has 8 columns
    out[i] = v[0]
