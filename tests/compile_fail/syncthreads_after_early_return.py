import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i >= len(out):
        return
    simt.syncthreads()  # error[E0633] col 5: `simt.syncthreads()` under control flow that depends on the thread
    out[i] = x[i]
