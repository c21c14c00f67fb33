"""SIMT benchmarks on the GPU (issue 2): vecadd bandwidth vs torch, launch overhead, compile time.

    PYTHONPATH=src python bench/simt_bench.py --out bench/results/simt

Writes simt.json and prints a table. Timing: CUDA events through torch, warm-up first, median
of many runs; vecadd inputs are 2^28 f32 (3 GiB moved per run), far beyond the 60 MB L2.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))


def event_median_ms(fn, reps: int = 50, warmup: int = 5) -> float:  # type: ignore[no-untyped-def]
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def bench_vecadd(n: int) -> dict[str, float]:
    import simt_kernels as K
    import torch

    import fearless as fl

    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    grid = (n + 255) // 256
    K.vecadd[grid, 256](a, b, c)
    fl.synchronize()
    assert torch.equal(c, a + b), "fearless vecadd is wrong"
    prep = K.vecadd.prepare(grid)
    t_fl = event_median_ms(lambda: K.vecadd(prep, a, b, c))
    t_torch = event_median_ms(lambda: torch.add(a, b, out=c))
    t_fl2 = event_median_ms(lambda: K.vecadd(prep, a, b, c))  # again: the spread of one version
    gbs = lambda t: 3 * 4 * n / (t * 1e-3) / 1e9  # noqa: E731
    return {
        "n": n,
        "fearless_ms": t_fl,
        "fearless_ms_again": t_fl2,
        "torch_ms": t_torch,
        "fearless_GBs": gbs(t_fl),
        "torch_GBs": gbs(t_torch),
        "ratio_to_torch": t_torch / t_fl,
    }


def bench_safety(n: int) -> dict[str, float]:
    """Safe against `unsafe=True`: vecadd (checked, contract-proven) and a 1-D stencil."""
    import simt_cases as C
    import simt_kernels as K
    import torch

    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty(n, device="cuda")
    grid = (n + 255) // 256
    out: dict[str, float] = {}
    variants = {
        "vecadd_checked": K.vecadd,
        "vecadd_contract": C.vecadd_contract,
        "vecadd_unsafe": C.vecadd_unsafe,
    }
    for name, k in variants.items():
        c.fill_(float("nan"))
        k[grid, 256](a, b, c)
        torch.cuda.synchronize()
        assert torch.equal(c, a + b), name
    for rnd in range(2):  # interleaved twice: the spread between rounds is the noise
        for name, k in variants.items():
            prep = k.prepare(grid)
            out[f"{name}_ms_r{rnd}"] = event_median_ms(lambda k=k, prep=prep: k(prep, a, b, c))
    x = torch.randn(n, device="cuda")
    for name, k in (("stencil_checked", C.stencil), ("stencil_unsafe", C.stencil_unsafe)):
        c.zero_()
        k[grid, 256](x, c)
        torch.cuda.synchronize()
        ref = x[:-2] + x[1:-1] + x[2:]
        assert torch.equal(c[1:-1], ref), name
    for rnd in range(2):
        for name, k in (("stencil_checked", C.stencil), ("stencil_unsafe", C.stencil_unsafe)):
            prep = k.prepare(grid)
            out[f"{name}_ms_r{rnd}"] = event_median_ms(lambda k=k, prep=prep: k(prep, x, c))
    med = lambda key: min(out[f"{key}_ms_r0"], out[f"{key}_ms_r1"])  # noqa: E731
    out["vecadd_safe_over_unsafe"] = med("vecadd_checked") / med("vecadd_unsafe")
    out["vecadd_contract_over_unsafe"] = med("vecadd_contract") / med("vecadd_unsafe")
    out["stencil_safe_over_unsafe"] = med("stencil_checked") / med("stencil_unsafe")
    return out


def bench_launch_overhead(launches: int = 20000) -> dict[str, float]:
    """Host time per warm launch with 3 array arguments, against raw cuLaunchKernel."""
    import simt_kernels as K
    import torch

    import fearless as fl

    n = 1024
    a, b, c = (torch.randn(n, device="cuda") for _ in range(3))
    prep = K.vecadd.prepare(4)
    K.vecadd(prep, a, b, c)
    fl.synchronize()

    def per_launch(fn) -> float:  # type: ignore[no-untyped-def]
        samples = []
        for _ in range(7):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(launches):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            samples.append((t1 - t0) / launches * 1e6)
        return statistics.median(samples)

    t_prep = per_launch(lambda: K.vecadd(prep, a, b, c))
    cfg = K.vecadd[4, 256]
    t_index = per_launch(lambda: cfg(a, b, c))
    raw = raw_launcher(K.vecadd, a, b, c)
    t_raw = per_launch(raw)
    import simt_cases as C

    eight = [torch.randn(n, device="cuda") for _ in range(8)]
    prep8 = C.sum8.prepare(4, 256)
    C.sum8(prep8, *eight)
    t_eight = per_launch(lambda: C.sum8(prep8, *eight))
    plan = prep.launcher.plan  # the launcher without the Kernel.__call__ wrapper
    t_plan = per_launch(lambda: plan.launch((4, 1, 1), (256, 1, 1), (a, b, c)))
    fa, fb, fc = (fl.asarray(x) for x in (a, b, c))  # fl.Tensor views: no torch attribute reads
    t_plan_fl = per_launch(lambda: plan.launch((4, 1, 1), (256, 1, 1), (fa, fb, fc)))
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(20000):
        plan.launch((4, 1, 1), (256, 1, 1), (a, b, c))
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(8)
    return {
        "prepared_us": t_prep,
        "indexed_us": t_index,
        "plan_launch_us": t_plan,
        "plan_launch_fl_tensor_us": t_plan_fl,
        "raw_cuLaunchKernel_us": t_raw,
        "ratio_prepared_to_raw": t_prep / t_raw,
        "prepared_8_arrays_us": t_eight,
    }


def raw_launcher(kernel, a, b, c):  # type: ignore[no-untyped-def]
    """cuLaunchKernel with pre-packed arguments: the floor of a launch from Python."""
    import ctypes

    from cuda.bindings import driver as cu

    from fearless.runtime.driver import load_kernel

    ck = kernel.compile()
    loaded = load_kernel(ck)
    vals = [
        ctypes.c_uint64(a.data_ptr()),
        ctypes.c_int64(a.numel()),
        ctypes.c_uint64(b.data_ptr()),
        ctypes.c_int64(b.numel()),
        ctypes.c_uint64(c.data_ptr()),
        ctypes.c_int64(c.numel()),
        ctypes.c_int64(4 * 256),  # the logical thread count
        ctypes.c_uint64(0),
    ]
    import torch

    rec = torch.zeros(16, dtype=torch.int64, device="cuda")
    vals[-1] = ctypes.c_uint64(rec.data_ptr())
    arr = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
    addr = ctypes.addressof(arr)
    f = loaded.function
    keep = (vals, arr, rec)

    def launch() -> None:
        cu.cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, 0, addr, 0)

    launch.keep = keep  # type: ignore[attr-defined]
    return launch


COMPILE_SNIPPET = r"""
import sys, time, json
t0 = time.perf_counter()
sys.path.insert(0, {src!r}); sys.path.insert(0, {examples!r})
import fearless as fl
import simt_kernels as K
from fearless.runtime import driver
driver.ensure_initialized()  # the CUDA context is up before timing (every GPU program pays it)
t1 = time.perf_counter()
ck = K.vecadd.compile()
from fearless.runtime.driver import load_kernel
load_kernel(ck)
t2 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "compile_and_load_s": t2 - t1, "cubin": ck.cubin is not None}}))
"""


def bench_compile() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "FEARLESS_CACHE_DIR": cache}
        code = COMPILE_SNIPPET.format(src=str(ROOT / "src"), examples=str(ROOT / "examples"))
        runs = []
        for _ in range(3):
            out = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
            )
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {
        "first_call_compile_s": runs[0]["compile_and_load_s"],
        "disk_cache_hit_s": statistics.median(r["compile_and_load_s"] for r in runs[1:]),
        "cubin_cached": runs[0]["cubin"],
        "import_s": runs[0]["import_s"],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results/simt")
    ap.add_argument("--log2n", type=int, default=28)
    args = ap.parse_args()
    import torch

    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    results["vecadd"] = bench_vecadd(1 << args.log2n)
    results["safety"] = bench_safety(1 << args.log2n)
    results["launch"] = bench_launch_overhead()
    results["compile"] = bench_compile()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "simt.json").write_text(json.dumps(results, indent=2))
    v, lo, c = results["vecadd"], results["launch"], results["compile"]
    print(f"GPU: {results['gpu']}")
    v, lo, c, sf = results["vecadd"], results["launch"], results["compile"], results["safety"]
    print(
        f"vecadd 2^{args.log2n} f32: fearless {v['fearless_GBs']:.0f} GB/s, "
        f"torch {v['torch_GBs']:.0f} GB/s, ratio {v['ratio_to_torch']:.3f}"
    )
    print(
        f"safe/unsafe: vecadd checked {sf['vecadd_safe_over_unsafe']:.4f}, contract-proven "
        f"{sf['vecadd_contract_over_unsafe']:.4f}, stencil {sf['stencil_safe_over_unsafe']:.4f}"
    )
    print(
        f"launch overhead, 3 arrays: prepared {lo['prepared_us']:.2f} us, k[g,b] "
        f"{lo['indexed_us']:.2f} us, plan.launch {lo['plan_launch_us']:.2f} us (fl.Tensor args "
        f"{lo['plan_launch_fl_tensor_us']:.2f} us), raw "
        f"cuLaunchKernel {lo['raw_cuLaunchKernel_us']:.2f} us; 8 arrays "
        f"{lo['prepared_8_arrays_us']:.2f} us"
    )
    print(
        f"compile: first call {c['first_call_compile_s'] * 1e3:.0f} ms, disk-cache hit "
        f"{c['disk_cache_hit_s'] * 1e3:.1f} ms (cubin cached: {c['cubin_cached']})"
    )


if __name__ == "__main__":
    main()
