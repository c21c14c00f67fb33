import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], seed: fl.i64):
    offs = tile.load_like(x, z)
    z.store(tile.rand(seed, offs))  # error[E0308] col 29: the offsets of `tile.rand` must be 32-bit integers (i32 or u32), found an f32 tile of shape
