import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], partial: simt.DisjointSlice[fl.f32]):
    total = simt.block.reduce(x[simt.grid(1)], "sum")
    partial[simt.thread.block_id()] = total  # error[E0601] col 5: `partial[simt.thread.block_id()]` may be written by more than one thread of the block
