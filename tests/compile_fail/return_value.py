import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = 1.0
    return 1  # error[E0603] col 12: kernels cannot return a value
