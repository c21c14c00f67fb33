import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    a[i] = 1.0  # error[E0594] col 5: cannot assign to `a[i]`, as `a` is a read-only `Slice`
