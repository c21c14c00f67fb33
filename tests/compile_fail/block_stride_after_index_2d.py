import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    t = simt.thread.index_2d()
    out[t] = 0.0
    for i in simt.thread.block_stride(out.shape[1]):  # error[E0602] col 14: `simt.thread.block_stride()` cannot be used in a kernel that also uses `simt.thread.index_2d()`
        out[i] = x[i]
