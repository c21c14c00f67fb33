import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    for k in range(0, 8, 1, 2):  # error[E0061] col 14: range() takes 1 to 3 positional arguments
        c[i] = 1.0
