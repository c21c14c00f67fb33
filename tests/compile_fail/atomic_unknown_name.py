import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.i32], counts: simt.AtomicSlice[fl.i32]):
    i = simt.thread.index_1d()
    if i < len(x):
        simt.atomic.nand(counts, 0, 1)  # error[E0433] col 9: `simt.atomic` has no attribute `nand`
