import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], y: simt.Slice[fl.f64], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = x[i] if x[i] > 0.0 else y[i]  # error[E0308] col 42: mismatched types in the arms of a conditional expression: f32 and f64
