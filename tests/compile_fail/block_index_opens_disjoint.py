import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.f32]):
    j = simt.thread.block_index_1d()
    out[j] = 1.0  # error[E0601] col 9: `out` is a DisjointSlice: it can only be written at this thread's own index
