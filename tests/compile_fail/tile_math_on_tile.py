import math

import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(math.log10(tile.load_like(x, z)))  # error[E0308] col 13: `math.log10` runs at compile time, on numbers, and the Tile track has no `tile.log10` for tiles
