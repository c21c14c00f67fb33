import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    g = simt.cg.this_grid()
    if simt.blockIdx.x == 0:  # the same for a block, not for the grid
        g.sync()  # error[E0633] col 9: `simt.cg.this_grid().sync()` under control flow that depends on the thread or block
    if i < len(out):
        out[i] = x[i]
