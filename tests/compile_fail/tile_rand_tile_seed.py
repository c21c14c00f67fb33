import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], seeds: tile.Tensor[fl.i32]):
    offs = tile.arange(z.shape[0], fl.i32)
    z.store(tile.randn(tile.load_like(seeds, z), offs))  # error[E0308] col 24: the seed of `tile.randn` must be an integer scalar, found an i32 tile
