import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    with tile.unsafe:  # error[E0620] col 10: `tile.unsafe` must be called: `with tile.unsafe():`
        z.store(tile.load_like(x, z))
