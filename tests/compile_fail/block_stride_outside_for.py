import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    cols = simt.thread.block_stride(out.shape[1])  # error[E0001] col 12: simt.thread.block_stride() can only be used as the iterable of a `for` loop
