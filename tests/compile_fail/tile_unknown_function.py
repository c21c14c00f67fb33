import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(tile.sigmod(tile.load_like(x, z)))  # error[E0433] col 13: `tile` has no function `sigmod`
