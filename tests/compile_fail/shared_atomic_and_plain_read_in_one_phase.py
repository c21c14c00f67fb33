import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.i32], hist: simt.DisjointSlice[fl.i32]):
    s = simt.shared.array((64,), fl.i32)
    j = simt.thread.block_index_1d()
    i = simt.thread.index_1d()
    s[j] = 0
    simt.syncthreads()
    simt.atomic.add(s, x[i], 1)
    hist[i] = s[j]  # error[E0632] col 15: `s` is read plainly in a phase where it takes atomics
