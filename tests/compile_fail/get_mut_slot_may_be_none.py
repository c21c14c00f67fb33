import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    s = out.get_mut(i)
    s.set(x[i])  # error[E0381] col 5: `s` may be None here: `out.get_mut(i)` is None when the index is out of range
