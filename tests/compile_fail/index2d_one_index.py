import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32, 2], c: simt.DisjointSlice[fl.f32, 2]):
    t = simt.thread.index_2d()
    c[t] = a[t.row]  # error[E0001] col 14: `a` is a 2-D array: index it with two integers
