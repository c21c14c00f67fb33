import fearless as fl
from fearless import simt


@simt.kernel
def kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    simt.unsafe()  # error[E0620] col 5: simt.unsafe() opens a region: use it as `with simt.unsafe():`
    out[simt.grid(1)] = x[0]
