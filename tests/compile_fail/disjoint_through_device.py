import fearless as fl
from fearless import simt


@simt.device
def put(c: simt.DisjointSlice[fl.f32], j: int, v: fl.f32):
    c[j] = v  # error[E0601] col 7: only be written at this thread's own index


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    put(c, int(i), 1.0)
