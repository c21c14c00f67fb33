import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_id()  # error[E0433] col 9: `simt.thread` has no attribute `index_id`
    c[i] = 1.0
