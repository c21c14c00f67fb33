import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    if simt.grid(1) < len(out):
        out[simt.grid(1)] = x[simt.grid(1)]  # error[E0601] col 13: `out` is a DisjointSlice: it can only be written at this thread's own index
