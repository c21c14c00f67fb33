import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.i32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = fl.i32(1e10)  # error[E0308] col 18: `10000000000.0` does not fit in i32
