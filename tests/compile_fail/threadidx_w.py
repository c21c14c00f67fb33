import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.i64]):
    i = simt.thread.index_1d()
    out[i] = simt.threadIdx.w  # error[E0433] col 14: `simt.threadIdx` has no attribute `w`
