import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], st: tile.Part[fl.f32] | None, x: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z))
    for t in st.tiles():  # error[E0308] col 14: `st.tiles` walks None, not a `tile.Part`
        t.store(tile.load_like(x, t))
