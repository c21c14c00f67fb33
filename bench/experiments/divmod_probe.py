"""Float `%` and `//` of Tile kernels on the GPU against the simulator, value by value:
`python3 bench/experiments/divmod_probe.py` on the GPU machine."""

import sys

import numpy as np

import fearless as fl

sys.path.insert(0, "tests")
from test_tile_heldout import MOD_W, MOD_X, make_divmod  # noqa: E402

from fearless import tile  # noqa: E402


def make_one(dt, kind):  # type: ignore[no-untyped-def]
    @tile.kernel
    def one(out: tile.Part[dt], x: tile.Tensor[dt], w: tile.Tensor[dt]):
        a, b = tile.load_like(x, out), tile.load_like(w, out)
        if kind == 0:
            out.store(a % b)
        else:
            out.store(a // b)

    return one


for kind in (0, 1):
    k = make_one(fl.f32, kind)
    got = []
    for target in ("sim", "cuda"):
        fl.set_target(target)
        part = fl.empty(40).partition((64,))
        k(part, fl.asarray(MOD_X.astype(np.float32)), fl.asarray(MOD_W.astype(np.float32)))
        fl.synchronize()
        got.append(part.unpartition().numpy())
    print("%" if kind == 0 else "//")
    for x, w, s, g in zip(MOD_X[:12], MOD_W[:12], got[0][:12], got[1][:12], strict=True):
        print(f"  {x!r:>8} {w!r:>8}  sim {s!r:>12}  gpu {g!r:>12}{'' if repr(s) == repr(g) else '   <-'}")
_ = make_divmod
