import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    for t in z.tiles(offset=tile.bid(0)):  # error[E0601] col 29: the offset of `z.tiles(offset=...)` differs from block to block
        t.store(tile.load_like(x, t))
