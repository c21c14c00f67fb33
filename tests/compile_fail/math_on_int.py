import math

import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.i32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = math.exp(a[i])  # error[E0308] col 12: `math.exp` needs a float argument, found i32
