from typing import NamedTuple

import fearless as fl
from fearless import tile


class Window(NamedTuple):
    lo: fl.f32
    hi: fl.f32


@tile.kernel
def kernel(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], w: Window):
    z.store(tile.minimum(tile.load_like(x, z), w.high))  # error[E0433] col 48: struct parameter `w` has no field `high`


kernel.specialise(tile.Spec((64,), fl.f32).partition((16,)), tile.Spec((64,), fl.f32), Window(fl.f32, fl.f32))
