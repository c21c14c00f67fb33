import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    s = "hello"  # error[E0001] col 9: the constant `'hello'` is not supported in kernels
    z.store(tile.load_like(x, z))
