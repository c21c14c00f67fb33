import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32, 2], c: simt.DisjointSlice[fl.f32, 2]):
    t = simt.thread.index_2d()
    if t.row < a.shape[2]:  # error[E0001] col 24: `a.shape[2]`: the axis must be a literal below 2
        c[t] = a[t]
