import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    s = b"hello"  # error[E0001] col 9: the constant `b'hello'` is not supported in kernels
    c[i] = 1.0
