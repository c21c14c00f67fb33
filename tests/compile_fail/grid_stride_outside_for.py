import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.f32]):
    it = simt.thread.grid_stride(len(out))  # error[E0001] col 10: simt.thread.grid_stride() can only be used as the iterable of a `for` loop
    out[0] = 1.0
