import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    return tile.load_like(x, z)  # error[E0603] col 12: kernels cannot return a value
