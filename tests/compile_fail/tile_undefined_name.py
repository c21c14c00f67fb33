import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) * undefined_scale)  # error[E0425] col 36: cannot find value `undefined_scale` in this scope
