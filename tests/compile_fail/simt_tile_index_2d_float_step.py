import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.f32, 2]):
    g = simt.thread.tile_index_2d(1.0, 32)  # error[E0308] col 35: simt.thread.tile_index_2d() needs an integer step
    out[g] = 0.0
