import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f16], x: tile.Tensor[fl.f16]):
    z.store(tile.load_like(x, z) * 1e5)  # error[E0308] col 13: the literal `100000.0` overflows f16: it would be inf
