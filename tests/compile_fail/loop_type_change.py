import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f64], c: simt.DisjointSlice[fl.f32], n: int):
    i = simt.thread.index_1d()
    s = fl.f32(0.0)
    for k in range(n):
        s = a[k]  # error[E0308] col 13: `s` is f32 on one path and f64 on another
    c[i] = s
