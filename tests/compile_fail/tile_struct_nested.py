from typing import NamedTuple

import fearless as fl
from fearless import tile


class Window(NamedTuple):
    lo: fl.f32
    hi: fl.f32


class Both(NamedTuple):
    w: Window
    scale: fl.f32


@tile.kernel
def kernel(z: tile.Part[fl.f32], b: Both):  # error[E0599] col 34: field `w` of `Both` is a `Window`: a struct parameter's fields are arrays, scalars and Consts
    z.store(tile.zeros(z.shape, fl.f32) + b.scale)
