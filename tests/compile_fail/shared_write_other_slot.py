import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    s = simt.shared.array((128,), fl.f32)
    j = simt.thread.block_index_1d()
    s[(int(j) + 1) % 128] = x[0]  # error[E0631] col 7: `s` is shared memory: a thread writes it only at its own slot
