import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    s = "hello"  # a compile-time value: fine until it is used as a number
    z.store(tile.load_like(x, z) * s)  # error[E0001] col 36: `'hello'` cannot be used as a value in a kernel
