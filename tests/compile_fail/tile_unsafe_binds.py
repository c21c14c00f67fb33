import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    with tile.unsafe() as u:  # error[E0620] col 27: `with tile.unsafe()` binds no value
        z.store(tile.load_like(x, z))
