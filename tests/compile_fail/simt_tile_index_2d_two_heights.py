import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.f32, 2]):
    g = simt.thread.tile_index_2d(0, 32)
    out[g] = 0.0
    h = simt.thread.tile_index_2d(0, 16)  # error[E0602] col 9: this kernel's tiles have 32 rows, not 16
    out[h] = 1.0
