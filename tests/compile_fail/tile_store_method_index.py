import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z), index=(0,))  # error[E0061] col 5: `store` takes no index: it writes the tile this block owns
