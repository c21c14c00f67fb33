import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    t = tile.load_like(x, z)
    print("t =", t)  # error[E0640] col 18: `print` in a Tile kernel prints scalars, not a tile of shape (128,)
    z.store(t)
