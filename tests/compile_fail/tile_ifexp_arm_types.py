import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.i32]):
    a = tile.load_like(x, z)
    b = tile.load_like(y, z)
    z.store(a if a > 0.0 else b)  # error[E0308] col 13: mismatched types in the arms of a conditional expression: f32 and i32
