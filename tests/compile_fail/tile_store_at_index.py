import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    tile.store(z, index=(0,), tile=tile.load_like(x, z))  # error[E0433] col 5: `tile.store` does not exist: a Tile kernel has no store at an arbitrary index
