import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f64], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = a[i]  # error[E0308] col 5: cannot store f64 into `c`, whose elements are f32
