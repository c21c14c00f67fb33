import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32, 2], c: simt.DisjointSlice[fl.f32, 2]):
    t = simt.thread.index_2d()
    if t.row < c.shape[0] and t.col < c.shape[1]:
        c[t] = a[t] + c[t.row, 0]  # error[E0601] col 25: `c` is a DisjointSlice: it can only be read at this thread's own index
