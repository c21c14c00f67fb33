import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], n: int):
    for t in z.tiles():
        t.store(tile.load_like(x, t))
    for t in z.tiles(offset=n):  # error[E0601] col 29: `z` is walked twice with different offsets
        t.store(tile.load_like(x, t) * 2.0)
