"""Decode attention (one query per head) against torch's SDPA, by configuration.

Times `attention_decode`'s kernels with each configuration given (tile of keys, occupancy,
waves: the key splits aim at waves x SMs blocks), at the ops bench's decode shapes and at
grouped-query shapes where B * H_kv is far under the SM count, then the operator itself
(`fearless.ops.scaled_dot_product_attention` on torch tensors, tuned), so that the operator's
host path shows beside its kernels. Run on the GPU machine:
`PYTHONPATH=src python3 bench/experiments/decode_configs.py`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import fearless as fl
from fearless import ops
from fearless.bench.timing import QUICK, DeviceTimer
from fearless.ops.kernels_attention import DECODE_CONFIGS, attention_decode
from fearless.ops.kernels_rows import sm_count

SHAPES = [  # (B, H, H_kv, S, D)
    (8, 32, 32, 2048, 128),
    (8, 32, 32, 4096, 128),
    (8, 32, 32, 16384, 128),
    (1, 32, 8, 8192, 128),
    (4, 32, 8, 4096, 128),
]
EXTRA = [
    dict(tile_n=256, occupancy=1, waves=1),
    dict(tile_n=64, occupancy=1, waves=1),
    dict(tile_n=64, occupancy=2, waves=1),
    dict(tile_n=128, occupancy=4, waves=1),
    dict(tile_n=128, occupancy=1, waves=2),
    dict(tile_n=128, occupancy=2, waves=4),
    dict(tile_n=64, occupancy=2, waves=4),
]


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
        for cfg in [*DECODE_CONFIGS, *EXTRA]:

            def run() -> None:
                attention_decode.fn(qd, kf, vf, of, d**-0.5, sms, **cfg)  # noqa: B023

            try:
                ms = timed(run)
            except fl.FearlessError as e:
                print(f"  {cfg}: failed: {str(e).splitlines()[0]}")
                continue
            err = float((out.float() - want).norm() / want.norm())
            print(
                f"  {cfg}: {ms * 1e3:8.1f} us, {nbytes / ms / 1e6:6.0f} GB/s, "
                f"{ms_torch / ms:.3f} of torch, rel err {err:.1e}"
            )
        ms = timed(lambda: ops.scaled_dot_product_attention(q, k, v, enable_gqa=gqa))  # noqa: B023
        print(
            f"  the operator (tuned, chose {attention_decode.best_config(qd, kf, vf, of, d**-0.5, sms)}): "
            f"{ms * 1e3:.1f} us, {ms_torch / ms:.3f} of torch"
        )


if __name__ == "__main__":
    main()
