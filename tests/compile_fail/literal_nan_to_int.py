import math

import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.i64]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = int(math.nan)  # error[E0308] col 18: `nan` does not fit in i64
