import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], total: simt.AtomicSlice[fl.f64]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.add(total, 0, x[i])  # error[E0308] col 35: mismatched types: `simt.atomic.add` on `total` takes f64 values, found f32
