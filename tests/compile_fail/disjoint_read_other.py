import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32], d: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    d[i] = c[0]  # error[E0601] col 14: `c` is a DisjointSlice: it can only be read at this thread's own index
