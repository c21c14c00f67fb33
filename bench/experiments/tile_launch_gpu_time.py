"""Is the Tile track's 8-array launch-overhead figure host time or kernel time?

`fearless bench`'s launch cases time 10,000 launches back to back; when a kernel runs longer
on the GPU than its launch takes on the host, the driver's queue fills and the figure becomes
the kernel's time. This prints, for the suite's launch kernels (one 1024-element tile), the
GPU time per launch (CUDA events around 1000 launches) and the host time per launch with a
synchronisation every 100 launches (the queue never fills), plus `add7` with its loads kept
off the TMA unit (no tensor-map setup in the kernel).

    source .tiletools/unpack.sh; PYTHONPATH=src python3 bench/experiments/tile_launch_gpu_time.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "examples"))

import tile_kernels as tk  # noqa: E402
import torch  # noqa: E402
from cuda_timing import events_ms  # noqa: E402

import fearless as fl  # noqa: E402
from fearless import tile  # noqa: E402

N = 1024


@tile.kernel
def add7_ldg(
    z: tile.Part[fl.f32],
    a: tile.Tensor[fl.f32],
    b: tile.Tensor[fl.f32],
    c: tile.Tensor[fl.f32],
    d: tile.Tensor[fl.f32],
    e: tile.Tensor[fl.f32],
    f: tile.Tensor[fl.f32],
    g: tile.Tensor[fl.f32],
):
    s = tile.load_like(a, z, allow_tma=False) + tile.load_like(b, z, allow_tma=False)
    s = s + tile.load_like(c, z, allow_tma=False) + tile.load_like(d, z, allow_tma=False)
    s = s + tile.load_like(e, z, allow_tma=False) + tile.load_like(f, z, allow_tma=False)
    z.store(s + tile.load_like(g, z, allow_tma=False))


def gpu_us(fn, n: int = 1000) -> float:  # type: ignore[no-untyped-def]
    return events_ms(fn, n, 20) * 1e3


def host_us(fn, batches: int = 50, per: int = 100) -> float:  # type: ignore[no-untyped-def]
    best = []
    for _ in range(batches):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(per):
            fn()
        best.append((time.perf_counter() - t) / per * 1e6)
    best.sort()
    return best[len(best) // 2]


def main() -> None:
    arrays = [torch.ones(N, device="cuda") for _ in range(8)]
    cases = {
        "fill_ones (1 array)": (tk.fill_ones, 1),
        "vecadd (3 arrays)": (tk.vecadd, 3),
        "add7 (8 arrays)": (tk.add7, 8),
        "add7, allow_tma=False": (add7_ldg, 8),
    }
    for name, (kernel, arity) in cases.items():
        out = torch.empty(N, device="cuda")
        part = fl.asarray(out).partition((N,))
        args = (part, *arrays[: arity - 1])
        fn = lambda kernel=kernel, args=args: kernel(*args)  # noqa: E731
        print(f"{name:24} GPU {gpu_us(fn):6.2f} us/launch   host {host_us(fn):6.2f} us/launch")
        print(f"{'':24} one launch, synchronised: {single_us(fn):6.2f} us (events)")
    diagnose(arrays)


def single_us(fn) -> float:  # type: ignore[no-untyped-def]
    """Median event time of one launch after a synchronisation: the kernel's own duration."""
    times = []
    for _ in range(50):
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    times.sort()
    return times[len(times) // 2]


def diagnose(arrays) -> None:  # type: ignore[no-untyped-def]
    """Host time with cuLaunchKernel stubbed (pure Python cost), slow-path calls, a profile."""
    import cProfile
    import pstats

    from fearless.runtime import driver
    from fearless.tile.kernel import Kernel

    out = torch.empty(N, device="cuda")
    part = fl.asarray(out).partition((N,))
    args = (part, *arrays[:7])
    tk.add7(*args)
    torch.cuda.synchronize()
    slow = {"n": 0}
    orig_prepare = Kernel._prepare

    def counting(self, *a, **k):  # type: ignore[no-untyped-def]
        slow["n"] += 1
        return orig_prepare(self, *a, **k)

    Kernel._prepare = counting  # type: ignore[method-assign]
    cu = driver.cu()
    real = cu.cuLaunchKernel
    for label, stub in (("real cuLaunchKernel", None), ("cuLaunchKernel stubbed", True)):
        if stub:
            cu.cuLaunchKernel = lambda *a: (cu.CUresult.CUDA_SUCCESS,)  # type: ignore[assignment]
        t = time.perf_counter()
        for _ in range(2000):
            tk.add7(*args)
        dt = (time.perf_counter() - t) / 2000 * 1e6
        torch.cuda.synchronize()
        print(f"add7 host, {label}: {dt:6.2f} us/launch; slow-path calls so far {slow['n']}")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        tk.add7(*args)
    prof.disable()
    cu.cuLaunchKernel = real  # type: ignore[assignment]
    Kernel._prepare = orig_prepare  # type: ignore[method-assign]
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
