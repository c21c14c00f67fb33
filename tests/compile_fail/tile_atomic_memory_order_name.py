import fearless as fl
from fearless import tile


@tile.kernel
def kernel(total: tile.Atomic[fl.f32], x: tile.Tensor[fl.f32]):
    tile.atomic_add(total, 0, tile.sum(tile.load(x, (0,), (128,)), axis=0), memory_order="seq")  # error[E0001] col 90: `memory_order='seq'` is not a memory order: the orders are "relaxed", "acquire", "release", "acq_rel"
