import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    x, y = i  # error[E0001] col 5: tuple unpacking is not supported in kernels
    c[i] = x
