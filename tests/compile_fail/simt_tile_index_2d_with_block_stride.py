import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.f32, 2]):
    for i in simt.thread.block_stride(out.shape[1]):
        out[i] = 0.0
    g = simt.thread.tile_index_2d(0, 8)  # error[E0602] col 9: `simt.thread.tile_index_2d()` cannot be used in a kernel that also uses `simt.thread.block_stride()`
    out[g] = 1.0
