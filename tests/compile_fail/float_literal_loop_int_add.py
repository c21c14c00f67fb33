import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    s = 0.0
    for j in range(4):
        s += j  # error[E0308] col 9: mismatched types in `+`: f32 and i64
    c[i] = s
