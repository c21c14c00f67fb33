import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z))  # error[E0601] col 13: `z` is stored as this block's own tile and walked with `z.tiles()`
    for t in z.tiles():
        t.store(tile.load_like(x, t) * 2.0)
