import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], st: tile.Part[fl.f32] | None, x: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z))
    for c in st.chunks((64,)):  # error[E0308] col 14: `st.chunks` splits None, not a `tile.Part`
        c.store(tile.load_like(x, c))
