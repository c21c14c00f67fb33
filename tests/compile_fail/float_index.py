import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32], x: fl.f32, c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = a[x]  # error[E0308] col 14: an array index must be an integer, found f32
