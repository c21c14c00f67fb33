import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32], b: simt.Slice[fl.f64], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = a[i] + b[i]  # error[E0308] col 12: mismatched types in `+`: f32 and f64
