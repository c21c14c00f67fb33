import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32], d: simt.DisjointSlice[fl.f32, 2]):
    i = simt.thread.index_1d()
    t = simt.thread.index_2d()  # error[E0602] col 9: `simt.thread.index_2d()` cannot be used in a kernel that also uses `simt.thread.index_1d()`
    c[i] = 1.0
    d[t] = 2.0
