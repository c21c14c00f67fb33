import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.f32], n: int):
    s = simt.shared.array((n,), fl.f32)  # error[E0630] col 27: `simt.shared.array` needs a shape of constant positive integers
