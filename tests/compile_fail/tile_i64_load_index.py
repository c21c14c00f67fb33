import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], i: fl.u32):
    z.store(tile.load(x, (i,), z.shape))  # error[E0308] col 26: tile indices and loop bounds are i32, found u32
