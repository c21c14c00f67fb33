import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: list, c: simt.DisjointSlice[fl.f32]):  # error[E0599] col 12: is not a kernel parameter type
    i = simt.thread.index_1d()
    c[i] = 1.0
