import fearless as fl
from fearless import simt


@simt.kernel
def kernel(m: simt.DisjointSlice[fl.f32, 2], out: simt.DisjointSlice[fl.f32]):
    t = simt.thread.index_2d()
    m[t] = 0.0
    for i in simt.thread.grid_stride(len(out)):  # error[E0602] col 14: `simt.thread.index_1d()` cannot be used in a kernel that also uses `simt.thread.index_2d()`
        out[i] = 1.0
