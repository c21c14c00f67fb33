import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    s = simt.shared.array((32, 33), fl.f32)
    for k in range(4):
        t = simt.thread.block_index_2d(k)
        s[t] = x[t.row, t.col]
    for k in range(4):
        t = simt.thread.block_index_2d(k)
        g = simt.thread.tile_index_2d(k, 32)
        out[g] = s[t.col, t.row]  # error[E0632] col 18: `s` is read at another thread's slot before a barrier
