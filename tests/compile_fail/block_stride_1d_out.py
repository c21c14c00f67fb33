import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    for i in simt.thread.block_stride(len(out)):
        out[i] = 1.0  # error[E0601] col 13: `out` is a DisjointSlice: it can only be written at this thread's own index
