import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.i64]):
    i = simt.thread.index_1d()
    c[i] = i  # error[E0602] col 5: a ThreadIndex cannot be stored into an array
