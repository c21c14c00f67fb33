import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.f32]):
    s = simt.shared.array((64,), fl.bool_)  # error[E0630] col 34: a shared array cannot hold elements of `bool`
