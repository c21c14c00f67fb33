import fearless as fl
from fearless import simt


@simt.kernel
def kernel(s: simt.shared.array, out: simt.DisjointSlice[fl.f32]):  # error[E0599] col 12: `simt.shared.array` is not a kernel parameter type
    pass
