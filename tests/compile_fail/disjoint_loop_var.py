import fearless as fl
from fearless import simt


@simt.kernel
def kernel(c: simt.DisjointSlice[fl.f32], n: int):
    for k in range(n):
        c[k] = 0.0  # error[E0601] col 11: only be written at this thread's own index
