"""Why the autotuner ranks GEMM configurations at M=N=K=1024 as if they all took ~1.9 ms:
host time of one tuned call, and the tuner's own device clock on it, on the GPU machine."""

import time

import torch

import fearless as fl
from fearless.autotuning import _DeviceClock
from fearless.ops.kernels_gemm import GEMM_CONFIGS, matmul_tuned

fl.set_target("cuda")
a = torch.randn(1024, 1024, device="cuda").half()
b = torch.randn(1024, 1024, device="cuda").half()
c = torch.empty(1024, 1024, device="cuda").half()
clock = _DeviceClock()
for cfg in (GEMM_CONFIGS[0], GEMM_CONFIGS[6]):

    def call(cfg=cfg):  # type: ignore[no-untyped-def]
        return matmul_tuned._run(cfg, (a, b, c), {})

    call()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(50):
        call()
    torch.cuda.synchronize()
    host = (time.perf_counter() - t) / 50 * 1e6
    dev = sorted(clock.time(call) for _ in range(9))[4] * 1e6
    t = time.perf_counter()
    clock.time(call)
    whole = (time.perf_counter() - t) * 1e6
    print(f"{cfg}: host {host:.1f} us per call, device clock {dev:.1f} us, one clock.time {whole:.0f} us")
