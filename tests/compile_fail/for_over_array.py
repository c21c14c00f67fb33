import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    for x in a:  # error[E0001] col 14: iterating over `a` is not supported in kernels
        pass
    c[i] = 1.0
