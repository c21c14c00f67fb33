import fearless as fl
from fearless import tile


@tile.kernel
def kernel(z: tile.Part[fl.f32], hist: tile.Atomic[fl.f32]):
    z.store(tile.load_like(hist, z))  # error[E0610] col 28: `hist` is a `tile.Atomic`: other blocks update it while this one runs, so it cannot be read with a plain load
