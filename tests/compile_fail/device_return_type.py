import fearless as fl
from fearless import simt


@simt.device
def truncate(v: fl.f32) -> fl.i32:
    return v  # error[E0308] col 12: `truncate` returns i32 (its annotation), but this value is f32


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.i32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = truncate(x[i])
