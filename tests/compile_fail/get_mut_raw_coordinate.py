import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    g = simt.grid(1)
    s = out.get_mut(g)  # error[E0601] col 21: `out` is a DisjointSlice: `out.get_mut` takes only this thread's own index
    if s is not None:
        s.set(x[g])
