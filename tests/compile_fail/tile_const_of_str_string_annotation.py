from __future__ import annotations

import fearless as fl
from fearless import tile


@tile.kernel
def kernel(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], N: tile.Const[str]):  # error[E0308] col 63: tile.Const[T] takes int, float or bool, not <class 'str'>
    out.store(tile.load_like(x, out))
