import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    s = x.get_mut(i)  # error[E0594] col 9: cannot take a mutable slot with `x.get_mut(i)`, as `x` is a read-only `Slice`
    if s is not None:
        s.set(0.0)
