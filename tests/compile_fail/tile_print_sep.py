import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    t = tile.load_like(x, z)
    print(tile.sum(t), sep=1)  # error[E0640] col 24: `sep=` of `print` must be a string literal
    z.store(t)
