"""Decode attention (one query per head) against torch's SDPA, by configuration.

Every configuration of `attention_decode` (tile of keys, occupancy, waves: the key splits aim
at waves x SMs blocks) and a few more, ranked by the autotuner's own clock: a spin kernel
holds the GPU while the host enqueues the timed call, so the figure is the kernels' time even
where the Python between a decode step's two launches is longer than they are (DeviceTimer's
L2 flush gives the host 85 us, less than that Python). Then the operator itself
(`fearless.ops.scaled_dot_product_attention` on torch tensors: tuned, and replayed from its
third call) under DeviceTimer. Shapes: the ops bench's decode cases and grouped-query ones
where B * H_kv is far under the SM count. Run on the GPU machine:
`PYTHONPATH=src python3 bench/experiments/decode_configs.py`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import fearless as fl
from fearless import ops
from fearless.ops.kernels_attention_decode import DECODE_CONFIGS, attention_decode
from fearless.ops.kernels_rows import sm_count
from fearless_bench.timing import QUICK, DeviceTimer

SHAPES = [  # (B, H, H_kv, S, D)
    (8, 32, 32, 2048, 128),
    (8, 32, 32, 16384, 128),
    (1, 32, 8, 8192, 128),
    (4, 32, 8, 4096, 128),
    (1, 32, 8, 32768, 128),
]
EXTRA = [
    dict(tile_n=256, occupancy=1, waves=1),
    dict(tile_n=64, occupancy=1, waves=1),
    dict(tile_n=64, occupancy=2, waves=1),
    dict(tile_n=128, occupancy=4, waves=1),
    dict(tile_n=128, occupancy=1, waves=2),
    dict(tile_n=128, occupancy=1, waves=4),
    dict(tile_n=128, occupancy=2, waves=4),
    dict(tile_n=64, occupancy=2, waves=4),
    dict(tile_n=64, occupancy=4, waves=8),
    dict(tile_n=128, occupancy=2, waves=8),
]
CONFIGS = [*DECODE_CONFIGS, *EXTRA]


@fl.autotune(configs=CONFIGS, key=["q", "k"])
def every_config(q, k, v, out, scale, sms, *, tile_n, occupancy, waves):  # type: ignore[no-untyped-def]
    attention_decode.fn(q, k, v, out, scale, sms, tile_n=tile_n, occupancy=occupancy, waves=waves)


def main() -> None:
    fl.set_target("cuda")
    timer = DeviceTimer(torch, QUICK)  # the bench's: CUDA events, L2 flushed, the median
    timed = lambda fn: timer.time(fn).median  # noqa: E731
    sms = sm_count()
    for b, h, hk, s, d in SHAPES:
        q = torch.randn(b, h, 1, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, hk, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        gqa = hk != h
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=gqa)
        ms_torch = timed(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa))  # noqa: B023
        nbytes = 2 * k.numel() * 2
        print(
            f"== B={b} H={h} H_kv={hk} S={s} D={d}: torch {ms_torch * 1e3:.1f} us, "
            f"{nbytes / ms_torch / 1e6:.0f} GB/s"
        )
        qd = fl.asarray(q.reshape(b, hk, h // hk, d))
        kf, vf = fl.asarray(k), fl.asarray(v)
        out = torch.empty(b, h, 1, d, device="cuda", dtype=torch.bfloat16)
        of = fl.asarray(out.view(b, hk, h // hk, d))
        every_config(qd, kf, vf, of, d**-0.5, sms)
        (times,) = every_config.timings.values()
        every_config.timings.clear()
        for cfg, t in sorted(zip(CONFIGS, times, strict=True), key=lambda ct: ct[1] or 1e9):
            line = (
                "failed"
                if t is None
                else (
                    f"{t * 1e6:8.1f} us, {nbytes / t / 1e9:6.0f} GB/s, {ms_torch * 1e-3 / t:.3f} of torch"
                )
            )
            print(f"  {cfg}: {line}")
        err = float((out.float() - want).norm() / want.norm())
        op = lambda: ops.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)  # noqa: B023, E731
        ms = timed(op)
        chose = attention_decode.best_config(qd, kf, vf, of, d**-0.5, sms)
        print(
            f"  the operator (chose {chose}): {ms * 1e3:.1f} us, {ms_torch / ms:.3f} of torch, "
            f"rel err {err:.1e}"
        )


if __name__ == "__main__":
    main()
