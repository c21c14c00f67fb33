import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    g = simt.grid(1)
    with simt.unsafe:  # error[E0620] col 10: `simt.unsafe` must be called: `with simt.unsafe():`
        out[g] = x[g]
