import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(tile.load(x, (0,), (256,)))  # error[E0308] col 13: cannot store a tile of shape (256,) into `z`, whose tiles are (128,)
