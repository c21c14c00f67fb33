import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(x):
        out[i] = x[i] * 1e39  # error[E0308] col 18: the literal `1e+39` overflows f32: it would be inf
