import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = out[0] + x[i]  # error[E0601] col 22: `out` is a DisjointSlice: it can only be read at this thread's own index
    simt.cg.this_grid().sync()
