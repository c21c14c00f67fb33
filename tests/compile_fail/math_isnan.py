import math

import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.bool_]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = math.isnan(x[i])  # error[E0605] col 18: `math.isnan` is not supported in kernels
