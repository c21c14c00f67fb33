import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.i32], n: fl.i32):
    i = -1
    for i in range(n):
        pass
    z.store(tile.full(z.shape, i, fl.i32))  # error[E0381] col 32: `i` may be used before it is assigned
