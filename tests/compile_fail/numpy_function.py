import numpy as np

import fearless as fl
from fearless import simt


@simt.kernel
def kernel(a: simt.Slice[fl.f32], c: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    c[i] = np.exp(a[i])  # error[E0605] col 12: cannot call `np.exp` from a kernel: it is a host Python function
