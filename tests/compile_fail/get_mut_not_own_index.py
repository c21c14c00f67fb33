import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if (s := out.get_mut(i + 1)) is not None:  # error[E0601] col 26: `out` is a DisjointSlice: `out.get_mut` takes only this thread's own index
        s.set(x[i])
