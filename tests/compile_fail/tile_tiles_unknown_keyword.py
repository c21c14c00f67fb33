import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32]):
    for t in z.tiles(step=2):  # error[E0061] col 14: `tiles()` takes no arguments but `offset=`
        t.store(tile.zeros(t.shape, fl.f32))
