import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load_like(x, z)
    z.store(tile.truediv(v, v, rounding_mode="fast"))  # error[E0001] col 46: `rounding_mode='fast'` is not a rounding mode: the modes are "nearest_even", "approx", "full"
