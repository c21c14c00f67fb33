import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    if tile.block_id(0) == 0:
        v = tile.load_like(x, z)
    z.store(v)  # error[E0381] col 13: `v` may be used before it is assigned
