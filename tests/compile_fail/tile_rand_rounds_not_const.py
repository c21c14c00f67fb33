import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.u32], seed: fl.u32, rounds: fl.i32):
    offs = tile.arange(z.shape[0], fl.u32)
    z.store(tile.randint(seed, offs, n_rounds=rounds))  # error[E0001] col 47: `n_rounds` of `tile.randint` must be a compile-time integer
