import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.i32], lo: fl.i32, hi: fl.i64):
    s = 0
    for _ in range(lo, hi):  # error[E0308] col 24: tile indices and loop bounds are i32, found i64
        s = s + 1
    z.store(tile.full(z.shape, s, fl.i32))
