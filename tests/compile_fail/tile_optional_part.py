import fearless as fl
from fearless import tile


@tile.kernel
def kernel(out: tile.Part[fl.f32] | None, x: tile.Tensor[fl.f32]):  # error[E0308] col 17: only tile.Tensor and tile.Atomic parameters may be optional (a Part is the launch's output and its grid)
    out.store(tile.load_like(x, out))
