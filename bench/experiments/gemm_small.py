"""ops.matmul's configurations one by one where fearless trails cuBLAS (M=N=K=1024 in f16 and
bf16; bf16 8192 x 8192 x 1024), against torch.matmul, in one process on the GPU machine:
`python3 bench/experiments/gemm_small.py`. Every configuration is timed with the suite's
DeviceTimer (L2 flushed before each run), so the best one here is what a noiseless tuner
would pick; the autotuner's own pick is printed beside it."""

import math

import torch

import fearless as fl
from fearless.ops.kernels_gemm import GEMM_CONFIGS, _gemm, matmul_tuned, prepare_matmul
from fearless_bench.timing import QUICK, DeviceTimer

EXTRA = [
    _gemm((64, 128), 64, 1, None),
    _gemm((64, 128), 64, 3, None),
    _gemm((128, 64), 64, 2, None),
    _gemm((64, 64), 64, 2, None),
    _gemm((64, 64), 128, 4, None),
    _gemm((64, 128), 128, 2, None),
    _gemm((128, 128), 128, 1, None),
    _gemm((128, 256), 64, 1, None),
    _gemm((64, 256), 64, 2, None),
    _gemm((64, 128), 64, 2, None, persistent=True),
    _gemm((64, 64), 64, 4, None, persistent=True),
]


def tflops(ms: float, m: int, n: int, k: int) -> float:
    return 2 * m * n * k / (ms * 1e-3) / 1e12


def main() -> None:
    fl.set_target("cuda")
    timer = DeviceTimer(torch, QUICK)
    for tdt, (m, n, k) in (
        (torch.float16, (1024, 1024, 1024)),
        (torch.bfloat16, (1024, 1024, 1024)),
        (torch.bfloat16, (8192, 8192, 1024)),
    ):
        a = torch.randn(m, k, device="cuda").to(tdt)
        b = torch.randn(k, n, device="cuda").to(tdt)
        c = torch.empty(m, n, device="cuda", dtype=tdt)
        want = a.float() @ b.float()
        rows: list[tuple[float, str]] = []
        ms = timer.time(lambda a=a, b=b: torch.matmul(a, b)).median
        rows.append((tflops(ms, m, n, k), f"torch {ms * 1e3:.1f} us"))
        for cfg in GEMM_CONFIGS + EXTRA:
            try:
                launch, part = prepare_matmul(a, b, c, **cfg)
                launch()
                t = timer.time(launch).median
                part.unpartition()
            except Exception as exc:  # a configuration that does not compile is reported
                print(f"  {cfg}: {str(exc).splitlines()[0][:120]}")
                continue
            err = (c.float() - want).abs().max().item() / math.sqrt(k)
            rows.append((tflops(t, m, n, k), f"{cfg} {t * 1e3:.1f} us err={err:.3g}"))
        matmul_tuned(a, b, c)
        print(f"== {tdt} {m}x{n}x{k}; the tuner picked {matmul_tuned.best_config(a, b, c)}")
        for v, name in sorted(rows, key=lambda r: -r[0])[:14]:
            print(f"  {v:6.1f} TFLOP/s  {name}")


if __name__ == "__main__":
    main()
