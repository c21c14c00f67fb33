import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.i32], hist: simt.AtomicSlice[fl.i32]):
    s = simt.shared.array((64,), fl.i32)
    j = simt.thread.block_index_1d()
    i = simt.thread.index_1d()
    s[j] = 0
    simt.atomic.add(s, x[i], 1)  # error[E0632] col 5: `s` takes an atomic in a phase where it is also written plainly
    simt.syncthreads()
    simt.atomic.add(hist, j, s[j])
