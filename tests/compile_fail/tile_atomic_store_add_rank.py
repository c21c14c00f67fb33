import fearless as fl
from fearless import tile


@tile.kernel
def kernel(acc: tile.Atomic[fl.f32]):
    tile.atomic_store_add(acc, (0,), tile.zeros((16, 16), fl.f32))  # error[E0308] col 38: `acc` has 1 dimension(s), but the tile has 2
