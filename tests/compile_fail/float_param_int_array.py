import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.i32], lo: float, out: simt.DisjointSlice[fl.i32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = x[i] + lo  # error[E0308] col 18: `lo` (a `float` parameter) cannot be used as i32 in `+`
