import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a, c: simt.DisjointSlice[fl.f32]):  # error[E0599] col 12: parameter `a` needs a type annotation
    i = simt.thread.index_1d()
    c[i] = 1.0
