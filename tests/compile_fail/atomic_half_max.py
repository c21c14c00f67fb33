import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f16], top: simt.AtomicSlice[fl.f16]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.max(top, 0, x[i])  # error[E0308] col 9: `simt.atomic.max` on f16 elements is not supported
