import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.f32, 2]):
    t = simt.thread.index_2d()
    out[t] = 0.0
    i = simt.thread.block_column(1)  # error[E0602] col 9: `simt.thread.block_column()` cannot be used in a kernel that also uses `simt.thread.index_2d()`
    out[i] = 1.0
