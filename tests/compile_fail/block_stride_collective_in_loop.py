import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    for i in simt.thread.block_stride(out.shape[1]):
        s = simt.block.reduce(x[i], "sum")  # error[E0633] col 13: `simt.block.reduce` under control flow that depends on the thread
        out[i] = s
