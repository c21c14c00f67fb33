import fearless as fl
from fearless import simt


@simt.kernel
def double(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = 2.0 * x[i]
