import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    g = simt.grid(1)
    with simt.unsafe() as u:  # error[E0620] col 27: `with simt.unsafe()` binds no value
        out[g] = x[g]
