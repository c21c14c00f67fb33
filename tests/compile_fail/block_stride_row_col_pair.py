import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    for i in simt.thread.block_stride(out.shape[1]):
        out[i.row, i.col + 1] = x[i]  # error[E0601] col 13: `out` is a DisjointSlice: it can only be written at this thread's own index
