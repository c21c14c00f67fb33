import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.i32], c: simt.DisjointSlice[fl.i32]):
    i = simt.thread.index_1d()
    c[i] = a[i] + 3000000000  # error[E0308] col 12: the literal `3000000000` cannot be used as i32
