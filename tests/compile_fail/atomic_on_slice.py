import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.i32], counts: simt.Slice[fl.i32]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.add(counts, x[i], 1)  # error[E0611] col 25: `simt.atomic.add` needs an AtomicSlice, but `counts` is a Slice
