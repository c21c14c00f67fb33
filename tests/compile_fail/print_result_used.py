import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    t = x[i]
    out[i] = t + print(t)  # error[E0001] col 14: `None` cannot be used as a value in a kernel
