import fearless as fl
from fearless import tile


@tile.kernel
def kernel(best: tile.Atomic[fl.f32], x: tile.Tensor[fl.f32]):
    tile.atomic_max(best, 0, tile.max(tile.load(x, (0,), (128,)), axis=0))  # error[E0308] col 21: `tile.atomic_max` does not take f32 arrays
