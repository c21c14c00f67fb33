import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.i32]):
    tile.atomic_add(z, tile.arange(128), 1)  # error[E0611] col 21: `tile.atomic_add` writes at computed coordinates, but `z` is a Part
