import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.i32], last: simt.AtomicSlice[fl.i64]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.exch(last, 0, i)  # error[E0602] col 35: a ThreadIndex cannot be stored into an array
