import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32, 2]):
    v = simt.local.array((1, 4), fl.f32)
    i = simt.thread.block_column(0, 4)
    v[0] = x[i]
    x[i] = v[0]  # error[E0594] col 5: cannot assign to `x[i]`, as `x` is a read-only `Slice`
