import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(tile.gather(x, tile.arange(128).astype(fl.f32)))  # error[E0308] col 28: coordinates must be integer tiles, but axis 0's are f32
