import fearless as fl
from fearless import simt


def helper(x):
    return x + 1


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = helper(1.0)  # error[E0605] col 12: cannot call `helper` from a kernel: it is a host Python function
