import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    t = a[i] > 0.0
    c[i] = fl.f32(t + t)  # error[E0308] col 19: `+` is not defined on bool
