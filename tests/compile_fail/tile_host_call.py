import fearless as fl
from fearless import tile


class Helper:
    """A callable object: host code (a plain function would be inlined)."""

    def __call__(self, v):
        return v + 1


helper = Helper()


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(helper(tile.load_like(x, z)))  # error[E0605] col 13: cannot call `helper` from a kernel: it is a host Python function
