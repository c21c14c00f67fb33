import fearless as fl
from fearless import simt


@simt.kernel
def kernel(n: int, out: simt.DisjointSlice[fl.f32]):
    a = simt.local.array(n, fl.f32)  # error[E0630] col 26: `simt.local.array` needs a shape of constant positive integers
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = a[0]
