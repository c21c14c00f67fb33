import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.i32], counts: simt.AtomicSlice[fl.i32], out: simt.DisjointSlice[fl.i32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = counts[x[i]]  # error[E0610] col 18: `counts` is an AtomicSlice: it can only be read through `simt.atomic`
