import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], xs: tuple[tile.Tensor[fl.f32], tile.Tensor[fl.f32]]):  # error[E0599] col 34: is no Tile parameter: a tuple parameter is `tuple[tile.Tensor[T], ...]`
    z.store(tile.load_like(xs[0], z))
