import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = round(x[i])  # error[E0605] col 18: `round` is not supported in kernels: it is a Python builtin
