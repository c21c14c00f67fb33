import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32]):
    v = tile.zeros((4, 8), fl.f32)
    z.store(v[4:8, 0])  # error[E0308] col 13: the window [4:8] of axis 0 of a (4, 8) tile is empty
