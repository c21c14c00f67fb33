import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    g = simt.blockIdx.x * simt.blockDim.x + simt.threadIdx.x
    j = g * 2 + 1
    out[j] = x[j]  # error[E0601] col 9: `out` is a DisjointSlice: it can only be written at this thread's own index
