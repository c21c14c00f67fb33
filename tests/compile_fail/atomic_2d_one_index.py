import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.i32], hist: simt.AtomicSlice[fl.i32, 2]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.add(hist, x[i], 1)  # error[E0308] col 31: `simt.atomic.add` on `hist`, a 2-D AtomicSlice, takes a pair `(row, col)` as its index, found 1 index
