import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.f32, 2]):
    t = simt.thread.index_2d()
    out[t] = 0.0
    g = simt.thread.tile_index_2d(1, 32)  # error[E0602] col 9: `simt.thread.tile_index_2d()` cannot be used in a kernel that also uses `simt.thread.index_2d()`
    out[g] = 1.0
