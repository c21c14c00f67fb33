import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32], n: int):
    s = simt.shared.array((32,), fl.f32)
    t = x
    if n > 3:  # error[E0001] col 5: `t` holds an array assigned on more than one path
        t = s
    i = simt.thread.index_1d()
    out[i] = t[i]
