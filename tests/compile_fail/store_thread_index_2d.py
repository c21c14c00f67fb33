import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.i64, 2]):
    t = simt.thread.index_2d()
    c[t] = t  # error[E0602] col 5: a ThreadIndex cannot be stored into an array
