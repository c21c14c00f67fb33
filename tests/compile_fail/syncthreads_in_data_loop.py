import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.i32]):
    i = simt.thread.index_1d()
    k = 0
    while k < x[i]:
        simt.syncthreads()  # error[E0633] col 9: `simt.syncthreads()` under control flow that depends on the thread
        k += 1
    out[i] = k
