import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32, 2], flag: bool):
    t = simt.thread.index_2d()
    if flag:  # error[E0602] col 5: `t` holds a 2-D ThreadIndex assigned on more than one path
        t = simt.thread.index_2d()
    c[t] = 1.0
