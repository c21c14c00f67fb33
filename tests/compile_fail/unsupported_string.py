import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    s = "hello"  # a compile-time value: fine until it is used as a number
    c[i] = s  # error[E0001] col 12: `'hello'` cannot be used as a value in a kernel
