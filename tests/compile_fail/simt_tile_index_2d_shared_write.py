import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32, 2]):
    s = simt.shared.array((32, 33), fl.f32)
    g = simt.thread.tile_index_2d(0, 32)
    s[g] = x[g.row, g.col]  # error[E0631] col 7: `s` is shared memory: a thread writes it only at its own slot
