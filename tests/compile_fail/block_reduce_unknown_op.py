import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    out[i] = simt.block.reduce(x[i], "mean")  # error[E0635] col 38: `simt.block.reduce` has no operation "mean": it takes "sum", "max" or "min"
