"""One first call, in a fresh process: `python -m fearless_bench.compile_probe IMPL`.

Prints one JSON line: {"seconds": ...} (the first launch of a vecadd, compile and module load
included, synchronised), or {"skip": reason}. Imports, the CUDA context and the inputs are
made before the clock starts, so the time is what a user waits for on a kernel's first call:
a compile when the cache directory is empty, a disk-cache hit when an earlier process filled
it (family_compile.py runs this with FEARLESS_CACHE_DIR, TRITON_CACHE_DIR and
CUDA_TILE_CACHE_DIR pointing at one fresh folder per implementation).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from .harness import print_probe_result
from .model import CUDA_CPP, CUTILE, FEARLESS_SIMT, FEARLESS_TILE, TRITON, Skip

N = 1 << 20


def _setup(impl: str, torch: Any) -> Callable[[], None]:
    """Everything up to the first call; returns the first call."""
    from .peers import Peers

    a = torch.randn(N, device="cuda")
    b = torch.randn(N, device="cuda")
    c = torch.empty(N, device="cuda")
    cap = torch.cuda.get_device_capability()
    peers = Peers(f"sm_{cap[0]}{cap[1]}")
    if impl == FEARLESS_SIMT:
        from fearless.runtime import driver

        peers.fearless_gpu()
        k = peers.simt_examples().vecadd
        driver.ensure_initialized()
        return lambda: k[(N + 255) // 256, 256](a, b, c)
    if impl == FEARLESS_TILE:
        import fearless as fl
        from fearless.runtime import driver

        from . import tile_track

        peers.fearless_gpu()
        kernel, tc = tile_track.resolve(peers.tile_examples(), tile_track.vecadd_case())
        driver.ensure_initialized()
        args = tile_track.bind(kernel, fl.asarray(c).partition(tc.tile), [a, b], consts=tc.consts)
        return lambda: kernel(*args)
    if impl == TRITON:
        kt = peers.triton()
        return lambda: kt.vecadd_launch(a, b, c)()
    if impl == CUTILE:
        kc = peers.cutile()
        return lambda: kc.vecadd_launch(a, b, c)()
    if impl == CUDA_CPP:
        from cuda.core import Device

        from . import kernels_cuda

        Device(0).set_current()

        def first() -> None:
            module = kernels_cuda.CudaModule(kernels_cuda.compile_cubin(peers.arch))
            args = [kernels_cuda.ptr(t) for t in (a, b, c)] + [kernels_cuda.i64(N)]
            module.launcher("vecadd", N, args)()

        return first
    raise Skip(f"unknown implementation {impl!r}")


def measure(impl: str) -> dict[str, Any]:
    """The first call's seconds, synchronised."""
    import torch

    if not torch.cuda.is_available():
        raise Skip("torch sees no GPU")
    first = _setup(impl, torch)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    first()
    torch.cuda.synchronize()
    return {"seconds": time.perf_counter() - t0}


def main(argv: list[str]) -> int:
    return print_probe_result(lambda: measure(argv[0]))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
