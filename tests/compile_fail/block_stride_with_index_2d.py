import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    for i in simt.thread.block_stride(out.shape[1]):
        out[i] = x[i]
    t = simt.thread.index_2d()  # error[E0602] col 9: `simt.thread.index_2d()` cannot be used in a kernel that also uses `simt.thread.block_stride()`
    out[t] = 0.0
