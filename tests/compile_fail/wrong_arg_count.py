import fearless as fl
from fearless import simt


@simt.device
def add(x: fl.f32, y: fl.f32) -> fl.f32:
    return x + y


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = add(1.0)  # error[E0061] col 12: `add` takes 2 arguments but 1 were given
