import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    total = simt.block.reduce(x[i], "sum")
    if simt.thread.block_index_1d() == 0:
        out[simt.thread.block_id()] = total
    out[i] = x[i]  # error[E0601] col 5: `out` is indexed by the block id at line 10, so no thread index opens it
