import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    with open("x") as f:  # error[E0001] col 5: the `With` statement is not supported in kernels
        pass
    c[i] = 1.0
