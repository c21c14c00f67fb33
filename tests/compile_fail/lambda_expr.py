import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    f = lambda x: x  # error[E0001] col 9: is not supported in kernels
    c[i] = 1.0
