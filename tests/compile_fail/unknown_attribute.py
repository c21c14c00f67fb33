import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = fl.nonexistent(1.0)  # error[E0433] col 12: `fl` has no attribute `nonexistent`
