import fearless as fl
from fearless import tile


@tile.kernel
def copy(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z))


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    copy(z, x)  # error[E0605] col 5: cannot launch the kernel `copy` from inside a kernel
