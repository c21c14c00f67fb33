import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    acc = tile.load_like(x, z)
    for k in range(0, 8, 1, 2):  # error[E0061] col 14: range() takes 1 to 3 positional arguments
        acc = acc + 1.0
    z.store(acc)
