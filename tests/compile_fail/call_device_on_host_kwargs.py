import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = max(1.0, b=2.0)  # error[E0061] col 12: does not take keyword arguments in kernels
