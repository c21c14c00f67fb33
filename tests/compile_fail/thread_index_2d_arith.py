import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.i64, 2]):
    t = simt.thread.index_2d()
    c[t] = t + 1  # error[E0308] col 12: expected a scalar operand, found a 2-D ThreadIndex
