import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], partial: simt.DisjointSlice[fl.f32]):
    total = simt.block.reduce(x[simt.grid(1)], "sum")
    if simt.thread.block_index_1d() < 2:
        partial[simt.thread.block_id()] = total  # error[E0601] col 9: `partial[simt.thread.block_id()]` may be written by more than one thread of the block
