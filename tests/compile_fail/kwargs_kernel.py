import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32], *rest):  # error[E0061] col 1: kernel parameters must be plain positional parameters
    i = simt.thread.index_1d()
    c[i] = 1.0
