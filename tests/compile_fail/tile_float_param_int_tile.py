import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.i32], x: tile.Tensor[fl.i32], alpha: float):
    z.store(alpha * tile.load_like(x, z))  # error[E0308] col 13: `alpha` (a `float` parameter) cannot be used as i32 in `*`
