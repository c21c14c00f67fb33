import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    for v in x:  # error[E0001] col 14: iterating over `x` is not supported in kernels
        z.store(v)
