import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.i32], ticket: simt.AtomicSlice[fl.i64]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.inc(ticket, 0, 100)  # error[E0308] col 9: `simt.atomic.inc` is a wrapping counter on u32 or u64 elements, but `ticket` holds i64
