import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.i32], lock: simt.AtomicSlice[fl.i32]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.cas(lock, 0, 1)  # error[E0061] col 9: `simt.atomic.cas` takes 4 arguments but 3 were given
