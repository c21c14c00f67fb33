import fearless as fl
from fearless import simt


@simt.device
def positive(v: fl.f32) -> fl.f32:  # error[E0308] col 1: does not return a value on every path
    if v > 0.0:
        return v


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = positive(x[i])
