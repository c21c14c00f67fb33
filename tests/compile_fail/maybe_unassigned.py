import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(a):
        v = a[i]
    c[i] = v  # error[E0381] col 12: `v` may be used before it is assigned
