import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    s = simt.shared.array((128,), fl.f32)
    j = simt.thread.block_index_1d()
    i = simt.thread.index_1d()
    s[j] = x[i]
    out[i] = s[(int(j) + 1) % 128]  # error[E0632] col 14: `s` is read at another thread's slot before a barrier
