import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.bool_]):
    z.store(tile.arange(4, fl.bool_))  # error[E0308] col 28: `tile.arange` counts in a number dtype, not bool
