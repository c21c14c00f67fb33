import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    simt.cg.this_grid().sync()
    if i < len(out):
        out[i] = x[i]
        v = out[0]  # error[E0636] col 13: `out` is read at another thread's element in a grid phase that also writes it
