import fearless as fl
from fearless import simt


@simt.device
def first(a: simt.Slice[fl.f32]) -> fl.f32:
    return a[0]


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = first(c)  # error[E0308] col 18: a DisjointSlice cannot be passed as a Slice
