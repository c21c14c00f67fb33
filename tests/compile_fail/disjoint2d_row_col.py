import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32, 2]):
    t = simt.thread.index_2d()
    c[t.row, t.col] = 1.0  # error[E0601] col 7: `c` is a DisjointSlice: it can only be written at this thread's own index
