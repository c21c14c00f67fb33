import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    a, *b = (1.0, 2.0, 3.0)  # error[E0001] col 5: a starred assignment target (`a, *b = ...`) is not supported in kernels
    z.store(tile.load_like(x, z) * a)
