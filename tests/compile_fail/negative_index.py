import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = a[-1]  # error[E0001] col 14: negative index `-1`: kernels do not count from the end
