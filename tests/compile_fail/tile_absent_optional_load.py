import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], m: tile.Tensor[fl.f32] | None):
    y = tile.load_like(x, z)
    if m is not None:
        y = y * tile.load_like(m, z)
    z.store(y + tile.load_like(m, z))  # error[E0308] col 32: the first argument of `tile.load_like` is None, not an array
