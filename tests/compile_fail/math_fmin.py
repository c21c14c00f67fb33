import math

import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = math.fmin(x[i], 1.0)  # error[E0433] col 18: `math` has no attribute `fmin`
