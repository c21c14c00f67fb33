import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    v = x[i]
    if v > 0.0:
        out[i] = simt.warp.reduce(v, "sum")  # error[E0633] col 18: `simt.warp.reduce` under control flow that depends on the thread
