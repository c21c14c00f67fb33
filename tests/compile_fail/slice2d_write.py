import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32, 2]):
    t = simt.thread.index_2d()
    a[t] = 0.0  # error[E0594] col 5: cannot assign to `a[t]`, as `a` is a read-only `Slice`
