import fearless as fl
from fearless import tile


@tile.kernel
def kernel(acc: tile.Atomic[fl.f32]):
    tile.atomic_store_add(acc, (0,), tile.zeros((16,), fl.f16))  # error[E0308] col 38: the values are f16 but `acc` holds f32
