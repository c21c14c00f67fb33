import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.i32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = a[i] * 0.5  # error[E0308] col 12: the literal `0.5` cannot be used as i32
