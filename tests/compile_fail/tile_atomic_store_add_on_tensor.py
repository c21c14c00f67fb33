import fearless as fl
from fearless import tile


@tile.kernel
def kernel(x: tile.Tensor[fl.f32]):
    tile.atomic_store_add(x, (0,), tile.zeros((16,), fl.f32))  # error[E0611] col 27: `tile.atomic_store_add` writes at computed coordinates, but `x` is a read-only Tensor
