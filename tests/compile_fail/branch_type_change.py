import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32], b: simt.Slice[fl.i32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    v = a[i]
    if i < 10:
        v = b[i]  # error[E0308] col 13: `v` is f32 on one path and i32 on another
    c[i] = v
