import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.i32], c: simt.DisjointSlice[fl.i32]):
    i = simt.thread.index_1d()
    c[i] = a[i] / 2  # error[E0308] col 12: true division of integers is not defined in kernels
