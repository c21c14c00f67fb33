import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    v = a[i]
    v @= a[i]  # error[E0001] col 5: the operator in `v @= a[i]` is not supported in kernels
    c[i] = v
