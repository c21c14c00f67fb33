import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], top: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.max(top, 0, x[i])  # error[E0611] col 25: `simt.atomic.max` needs an AtomicSlice, but `top` is a DisjointSlice
