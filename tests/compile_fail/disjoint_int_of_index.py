import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    j = int(i)
    c[j] = 1.0  # error[E0601] col 7: only be written at this thread's own index
