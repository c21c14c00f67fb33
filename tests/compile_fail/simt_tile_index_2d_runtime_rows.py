import fearless as fl
from fearless import simt


@simt.kernel
def kernel(rows: int, out: simt.DisjointSlice[fl.f32, 2]):
    g = simt.thread.tile_index_2d(0, rows)  # error[E0602] col 38: simt.thread.tile_index_2d() needs the tile's row count as a constant
    out[g] = 0.0
