"""Does the autotuner's device clock time the kernels, not the host? On the GPU machine.

For two GEMM configurations at M=N=K=1024 (f16): the host time of one tuned call, the clock
with its spin gate off (gate 0: what the tuner measured before the gate), the clock as the tuner
uses it, the same with 2 ms of extra host time in the call (a gate that works still reads the
kernel), and the benchmarks' DeviceTimer (many back-to-back calls) as the reference."""

import time

import torch

import fearless as fl
from fearless.autotune_timing import DeviceClock as _DeviceClock
from fearless.ops.kernels_gemm import GEMM_CONFIGS, matmul_tuned
from fearless_bench.timing import FULL, DeviceTimer

fl.set_target("cuda")
a = torch.randn(1024, 1024, device="cuda").half()
b = torch.randn(1024, 1024, device="cuda").half()
c = torch.empty(1024, 1024, device="cuda").half()
timer = DeviceTimer(torch, FULL)


def median(clock: _DeviceClock, call, gate: float | None = None) -> float:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(9):
        if gate is not None:
            clock.gate = gate
        out.append(clock.time(call))
    return sorted(out)[4] * 1e6


for cfg in (GEMM_CONFIGS[0], GEMM_CONFIGS[6], GEMM_CONFIGS[-1]):

    def call(cfg=cfg):  # type: ignore[no-untyped-def]
        return matmul_tuned._run(cfg, (a, b, c), {})

    def slow(cfg=cfg):  # type: ignore[no-untyped-def]
        time.sleep(0.002)
        return matmul_tuned._run(cfg, (a, b, c), {})

    call()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(50):
        call()
    torch.cuda.synchronize()
    host = (time.perf_counter() - t) / 50 * 1e6
    clock = _DeviceClock()
    ungated = median(clock, call, gate=0.0)
    clock = _DeviceClock()
    gated = median(clock, call)
    gate_after = clock.gate * 1e6
    slow_gated = median(clock, slow)
    ref = timer.time(call).median * 1e3
    print(
        f"{cfg}: host {host:.1f} us/call; clock ungated {ungated:.1f} us, gated {gated:.1f} us "
        f"(gate {gate_after:.0f} us), gated with +2 ms host {slow_gated:.1f} us "
        f"(gate {clock.gate * 1e6:.0f} us); DeviceTimer {ref:.1f} us"
    )
