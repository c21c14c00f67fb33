import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    for i, j in range(4):  # error[E0001] col 9: a loop target that is not a plain name is not supported in kernels
        z.store(tile.load_like(x, z))
