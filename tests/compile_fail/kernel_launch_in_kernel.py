import fearless as fl
from fearless import simt


@simt.kernel
def fill(c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = 1.0


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32]):
    fill[1, 32](c)  # error[E0605] col 5: cannot launch the kernel `fill` from inside a kernel
