"""Warm launch overhead of the runtime: GpuLaunchPlan.launch vs raw cuLaunchKernel, 3 arrays.

Both launch the same hand-written PTX vecadd (tests/gpu/test_runtime_gpu.py) from the same
process, on the legacy default stream, with one block of 32 threads so the GPU always keeps up
and the host cost is what gets measured. "raw" is cuda.bindings' cuLaunchKernel with its
argument buffer packed once beforehand (DESIGN section 4's floor); "fearless" is the whole
checked launch: grid/block lookup, per-array pointer/length/dtype reads, the borrow check,
packing, the driver call and the error-pool bookkeeping.

    PYTHONPATH=src python bench/launch_overhead_runtime.py [--repeats 50] [--launches 2000] [--json FILE]
"""

from __future__ import annotations

import argparse
import ast
import ctypes
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import fearless as fl  # noqa: E402
from fearless.abi import CompiledKernel, LaunchContract, ParamSpec  # noqa: E402
from fearless.runtime import driver, tensor  # noqa: E402
from fearless.runtime.device_errors import synchronize  # noqa: E402
from fearless.runtime.launch import GpuLaunchPlan  # noqa: E402
from fearless.runtime.target import cuda_status  # noqa: E402


def vecadd_ptx() -> str:
    """The VECADD_PTX string of the GPU tests, read without importing them (no pytest needed)."""
    tree = ast.parse((ROOT / "tests" / "gpu" / "test_runtime_gpu.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "VECADD_PTX":
            return str(ast.literal_eval(node.value))
    raise SystemExit("VECADD_PTX not found in tests/gpu/test_runtime_gpu.py")


def per_launch_us(launch: Callable[[], Any], repeats: int, launches: int) -> float:
    """Median over `repeats` batches of the mean host time of one launch (after warm-up)."""
    for _ in range(launches):
        launch()
    driver.synchronize_context()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(launches):
            launch()
        samples.append((time.perf_counter() - start) / launches * 1e6)
        driver.synchronize_context()
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--launches", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    ok, why = cuda_status()
    if not ok:
        raise SystemExit(f"needs a GPU: {why}")
    info = driver.ensure_initialized()
    ck = CompiledKernel(
        name="vecadd",
        entry="fearless_vecadd",
        params=(
            ParamSpec("a", "slice", fl.f32),
            ParamSpec("b", "slice", fl.f32),
            ParamSpec("c", "disjoint", fl.f32),
        ),
        sites=(),
        contract=LaunchContract(),
        arch=info.arch,
        ptx=vecadd_ptx(),
    )
    plan = GpuLaunchPlan(ck)
    fl.set_target("cuda")
    n = 32
    a, b, c = tensor.full(n, 1.0, dtype=fl.f32), tensor.full(n, 2.0, dtype=fl.f32), tensor.zeros(n)

    # raw: the same function, arguments packed once into a void** array
    values = [ctypes.c_uint64(a.data_ptr), ctypes.c_int64(n), ctypes.c_uint64(b.data_ptr)]
    values += [ctypes.c_int64(n), ctypes.c_uint64(c.data_ptr), ctypes.c_int64(n)]
    values.append(ctypes.c_uint64(plan.pool._record_address(plan.slot)))
    pointers = (ctypes.c_void_p * len(values))(*(ctypes.addressof(v) for v in values))
    address = ctypes.addressof(pointers)
    cu = driver.cu()
    fn, stream, launch_kernel = plan.kernel.function, cu.CUstream(0), cu.cuLaunchKernel

    def raw() -> None:
        (err,) = launch_kernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, address, 0)
        if err:
            raise RuntimeError(err)

    fl_args = (a, b, c)
    results: dict[str, float] = {
        "raw cuLaunchKernel": per_launch_us(raw, args.repeats, args.launches),
        "fearless, fl.Tensor": per_launch_us(
            lambda: plan.launch(1, 32, fl_args), args.repeats, args.launches
        ),
    }
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        t_args = tuple(torch.full((n,), v, device="cuda") for v in (1.0, 2.0, 0.0))
        results["fearless, torch.Tensor"] = per_launch_us(
            lambda: plan.launch(1, 32, t_args), args.repeats, args.launches
        )
    synchronize()
    assert (c.numpy() == 3.0).all(), "the benchmarked kernel computed the wrong thing"

    floor = results["raw cuLaunchKernel"]
    print(f"{info.name} ({info.arch}), {args.repeats} x {args.launches} warm launches, 3 arrays")
    for name, us in results.items():
        print(f"  {name:<24} {us:6.2f} us   {us / floor:5.2f} x raw")
    if args.json is not None:
        args.json.write_text(json.dumps({"device": info.name, "us_per_launch": results}, indent=2))


if __name__ == "__main__":
    main()
