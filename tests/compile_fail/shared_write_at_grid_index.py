import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    s = simt.shared.array((128,), fl.f32)
    i = simt.thread.index_1d()
    s[i] = x[i]  # error[E0631] col 7: `s` is shared memory: a thread writes it only at its own slot
