import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: fl.f16, out: simt.DisjointSlice[fl.f16]):  # error[E0599] col 12: no f16 scalar
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = a
