import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    if tile.block_id(0):  # error[E0308] col 8: a condition must be bool, found i32
        z.store(tile.load_like(x, z))
