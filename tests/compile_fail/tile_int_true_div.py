import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.i32], x: tile.Tensor[fl.i32]):
    z.store(tile.load_like(x, z) / 2)  # error[E0308] col 13: true division of integers is not defined in kernels
