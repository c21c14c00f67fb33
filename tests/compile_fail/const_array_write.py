import numpy as np

import fearless as fl
from fearless import simt

LUT = np.arange(16, dtype=np.float32)


@simt.kernel
def kernel(x: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        LUT[x[i]] = 0.0  # error[E0594] col 9: cannot assign to `LUT[x[i]]`, as `LUT` is a module-level NumPy array: a kernel reads it as a constant
        out[i] = LUT[x[i]]
