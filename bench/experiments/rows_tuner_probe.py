"""Does the autotuner rank row-kernel configurations as the benchmark times them? On the GPU.

For row ops at 4096 x N (bf16; `op:N` arguments choose), every configuration of ROW_CONFIGS: the tuner's
clock on the whole tuned call (`_row_launch`: asarray, partition, launch, unpartition), the
same clock on the prepared launch alone, and the benchmark's DeviceTimer on the prepared launch
(what `fearless bench --cases shapes` reports), in microseconds."""

import sys

import torch

import fearless as fl
from fearless.autotune_timing import DeviceClock as _DeviceClock
from fearless.ops import kernels_rows as kr
from fearless_bench.timing import FULL, DeviceTimer

fl.set_target("cuda")
timer = DeviceTimer(torch, FULL)
clock = _DeviceClock()
cases = [("rms_norm", 4096), ("rms_norm", 8192), ("layer_norm", 8192)]
if len(sys.argv) > 1:
    cases = [(op, int(n)) for op, n in (a.split(":") for a in sys.argv[1:])]


def med(fn, k=15):  # type: ignore[no-untyped-def]
    return sorted(clock.time(fn) for _ in range(k))[k // 2] * 1e6


for op, n in cases:
    x = torch.randn(4096, n, device="cuda").bfloat16()
    w = torch.randn(n, device="cuda").bfloat16()
    b = torch.randn(n, device="cuda").bfloat16()
    y = torch.empty_like(x)
    rest = {"softmax": (), "rms_norm": (w, 1e-6), "layer_norm": (w, b, 1e-6)}[op]
    gbs = 2 * x.numel() * 2 / 1e3
    print(f"== {op} 4096 x {n} bf16 (GB/s at 1 us: {gbs:.0f})")
    for cfg in kr.ROW_CONFIGS:
        try:
            launch, part = kr.prepare_rows(op, y, x, *rest, **cfg)
            launch()
            part.unpartition()

            def whole(cfg=cfg, op=op, y=y, x=x, rest=rest):  # type: ignore[no-untyped-def]
                kr._row_launch(op, y, x, *rest, **cfg)

            whole()
            torch.cuda.synchronize()
            t_whole = med(whole)
            launch, part = kr.prepare_rows(op, y, x, *rest, **cfg)
            t_launch = med(launch)
            t_bench = timer.time(launch).median * 1e3
            part.unpartition()
        except fl.FearlessError as e:
            print(f"  {cfg}: {type(e).__name__}")
            continue
        print(
            f"  {cfg}: tuner(call) {t_whole:7.1f}  tuner(launch) {t_launch:7.1f}  "
            f"bench {t_bench:7.1f} us  ({gbs / t_bench:.0f} GB/s)  gate {clock.gate * 1e6:.0f}"
        )
