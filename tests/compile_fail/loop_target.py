import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    for j, k in range(4):  # error[E0001] col 9: a loop target that is not a plain name is not supported in kernels
        c[i] = 1.0
