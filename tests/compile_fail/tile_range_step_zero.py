import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.i32]):
    s = 0
    for i in range(8, 0, 0):  # error[E0001] col 26: range() step must not be zero
        s = s + i
    z.store(tile.full(z.shape, s, fl.i32))
