import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.f32]):
    a, *b = (1.0, 2.0, 3.0)  # error[E0001] col 5: a starred assignment target (`a, *b = ...`) is not supported in kernels
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = a
