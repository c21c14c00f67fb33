import fearless as fl
from fearless import simt


@simt.kernel
def kernel(out: simt.DisjointSlice[fl.f32, 2]):
    i = simt.thread.block_column(0, 4)
    out[i] = 1.0  # error[E0001] col 9: `i` is the first column of a chunk: it moves the whole chunk, not one element
