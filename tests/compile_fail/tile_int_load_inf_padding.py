import math

import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
    z.store(tile.load_like(x, z, padding=-math.inf))  # error[E0308] col 42: the padding of a load of i32 must be a value i32 holds, not -inf
