import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.i32], c: simt.DisjointSlice[fl.i32]):
    i = simt.thread.index_1d()
    if a[i]:  # error[E0308] col 8: a condition must be bool, found i32
        c[i] = 1
