import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = a[1:3]  # error[E0001] col 14: only single-element indexing is supported in kernels
