import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(tile.gather(z, tile.arange(128)))  # error[E0601] col 25: `tile.gather` cannot read `z`, a Part: other blocks own its other tiles
