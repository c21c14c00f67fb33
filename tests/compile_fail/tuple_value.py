import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    t = 1.0, 2.0  # error[E0001] col 9: a tuple value is not supported in kernels
    c[i] = 0.0
