import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    for p in range(2):
        for t in z.tiles(offset=p):  # error[E0601] col 33: the offset of `z.tiles(offset=...)` changes from one trip of a loop around the walk to the next
            t.store(tile.load_like(x, t))
