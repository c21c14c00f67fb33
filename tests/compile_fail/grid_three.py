import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.i64]):
    i = simt.thread.index_1d()
    x, y, z = simt.grid(3)  # error[E0001] col 25: `simt.grid(3)` is not supported in kernels
    out[i] = x
