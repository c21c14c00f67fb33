import numpy as np

import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(np.exp(tile.load_like(x, z)))  # error[E0605] col 13: cannot call `np.exp` from a kernel: it is a host Python function
