import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32]):
    v = tile.zeros((4, 8), fl.f32)
    z.store(tile.full(z.shape, tile.sum(v, axis=(0, -2)), fl.f32))  # error[E0308] col 49: `tile.sum` names an axis twice in `axis=(0, -2)`
