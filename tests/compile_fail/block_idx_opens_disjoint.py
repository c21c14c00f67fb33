import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], partial: simt.DisjointSlice[fl.f32]):
    total = simt.block.reduce(x[simt.grid(1)], "sum")
    if simt.threadIdx.x == 0:
        partial[simt.blockIdx.x] = total  # error[E0601] col 17: `partial` is a DisjointSlice: it can only be written at this thread's own index
