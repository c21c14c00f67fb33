import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    tile.scatter(x, tile.arange(128), 1.0)  # error[E0611] col 18: `tile.scatter` writes at computed coordinates, but `x` is a read-only Tensor
    z.store(tile.load_like(x, z))
