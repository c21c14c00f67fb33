import numpy as np

import fearless as fl
from fearless import simt

NAMES = np.array(["relu", "gelu"], dtype=object)


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = NAMES[0]  # error[E0650] col 18: `NAMES` is a NumPy array of object: a kernel reads module-level arrays of numbers only
