import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    s = simt.shared.array((16, 16), fl.f32)
    g = simt.thread.index_2d()
    s[g] = x[g.row, g.col]  # error[E0631] col 7: `s` is shared memory: a thread writes it only at its own slot
