import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z[0] = tile.load_like(x, z)  # error[E0070] col 5: cannot assign to `z[0]`
