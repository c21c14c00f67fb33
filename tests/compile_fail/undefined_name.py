import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = undefined_thing  # error[E0425] col 12: cannot find value `undefined_thing` in this scope
