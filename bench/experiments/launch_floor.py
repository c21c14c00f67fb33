"""How much of a launch is the driver call itself: cuLaunchKernel through cuda.bindings (the
suite's `raw-cuLaunchKernel` floor) against the same call through ctypes on libcuda, and a
fearless SIMT and Tile warm launch of the same vecadd, all on torch tensors, in one process.
Run on the GPU machine: `python3 bench/experiments/launch_floor.py`."""

from __future__ import annotations

import ctypes
import statistics
import time

import torch

import fearless as fl
from fearless_bench.family_launch import raw_launcher
from fearless_bench.peers import Peers

N = 1024


def per_launch(fn, n=20000):  # type: ignore[no-untyped-def]
    for _ in range(2000):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(runs)


def main() -> None:
    fl.set_target("cuda")
    peers = Peers("sm_90")
    peers.fearless_gpu()
    vecadd = peers.simt_examples().vecadd
    arrays = [torch.randn(N, device="cuda") for _ in range(3)]
    raw = raw_launcher(torch, vecadd, arrays, 4)
    packer, _, loaded = raw.keep  # type: ignore[attr-defined]
    lib = ctypes.CDLL("libcuda.so.1")
    launch = lib.cuLaunchKernel
    launch.restype = ctypes.c_int
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    fn = int(loaded.function)
    addr = packer.address

    def via_ctypes() -> None:
        launch(fn, 4, 1, 1, 256, 1, 1, 0, None, addr, None)

    prep = vecadd.prepare(4)
    a, b, c = arrays

    def simt() -> None:
        vecadd(prep, a, b, c)

    def simt_cfg() -> None:
        vecadd[4, 256](a, b, c)

    from fearless.runtime import launch as fl_launch
    from fearless.runtime import streams

    fa, fb, fc = (fl.asarray(x) for x in arrays)
    plan = vecadd._launcher().plan
    with_c = plan.launch
    plan_c, plan.cplan = plan.cplan, None
    python_only = fl_launch.build_launcher(plan, fl_launch._PACK_ERRORS)[0]
    plan.cplan = plan_c
    g = (4, 256)
    rows = {
        "cuda.bindings cuLaunchKernel (raw floor)": per_launch(raw),
        "ctypes libcuda.cuLaunchKernel": per_launch(via_ctypes),
        "fearless SIMT k(prep, a, b, c), torch tensors": per_launch(simt),
        "fearless SIMT k[4, 256](a, b, c), torch tensors": per_launch(simt_cfg),
        "plan launcher, C path, torch tensors": per_launch(lambda: with_c(*g, (a, b, c))),
        "plan launcher, Python path, torch tensors": per_launch(lambda: python_only(*g, (a, b, c))),
        "plan launcher, C path, fl.Tensors": per_launch(lambda: with_c(*g, (fa, fb, fc))),
        "plan launcher, Python path, fl.Tensors": per_launch(lambda: python_only(*g, (fa, fb, fc))),
        "torch current stream (torch has CUDA)": per_launch(lambda: streams._torch_handle()),
    }
    print("compiled launcher:", plan_c is not None)
    for name, us in rows.items():
        print(f"{us:7.2f} us  {name}")


if __name__ == "__main__":
    main()
