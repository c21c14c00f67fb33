import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.i32], counts: simt.AtomicSlice[fl.i32]):
    i = simt.thread.index_1d()
    if i < len(x):
        counts[x[i]] = 1  # error[E0610] col 9: `counts` is an AtomicSlice: it can only be written through `simt.atomic`
