import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    v = simt.local.array((1, 4), fl.f32)
    for k in range(4):
        v[0, k] = x[0, k]
    t = simt.thread.index_2d()
    out[t] = v[0]  # error[E0001] col 5: a row of the local array `v` cannot be assigned to `out[t]`
