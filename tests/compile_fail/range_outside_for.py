import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    r = range(10)  # error[E0001] col 9: range() can only be used as the iterable of a `for` loop
    c[i] = 1.0
