import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    (i,) = z.index
    t = tile.load(x, (i,), (16,), order=(1, 0))  # error[E0001] col 41: `order=(1, 0)` has 2 axes: the tensor has 1 dimension(s), so `order` must be a permutation of (0,)
    z.store(t)
