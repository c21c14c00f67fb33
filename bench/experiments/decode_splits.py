"""Decode attention (one query per head) against torch's SDPA, by the number of key splits.

`ops.scaled_dot_product_attention`'s decode form splits the keys into `sm_count // (B * H_kv)`
parts; at B = 8, H = 32 that is one split. This times `attention_decode` with the SM count it
is given set so that the splits are 1, 2, 4, 8 and 16, to see whether the split count is what
holds the decode form at 0.05 of torch. Run on the GPU machine:
`PYTHONPATH=src python3 bench/experiments/decode_splits.py`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import fearless as fl
from fearless.bench.timing import QUICK, DeviceTimer
from fearless.ops.kernels_attention import attention_decode


def main() -> None:
    fl.set_target("cuda")
    timer = DeviceTimer(torch, QUICK)  # the bench's: CUDA events, L2 flushed, the median
    timed = lambda fn: timer.time(fn).median  # noqa: E731
    b, h, s, d = 8, 32, 4096, 128
    q = torch.randn(b, h, 1, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    ms_torch = timed(lambda: F.scaled_dot_product_attention(q, k, v))
    nbytes = 2 * k.numel() * 2
    print(f"torch: {ms_torch * 1e3:.1f} us, {nbytes / ms_torch / 1e6:.0f} GB/s")
    qd, kf, vf = (fl.asarray(t) for t in (q.reshape(b, h, 1, d), k, v))
    out = torch.empty(b, h, 1, d, device="cuda", dtype=torch.bfloat16)
    of = fl.asarray(out)
    for splits in (1, 2, 4, 8, 16):
        sms = splits * b * h

        def run() -> None:
            attention_decode(qd, kf, vf, of, d**-0.5, sms)  # noqa: B023

        ms = timed(run)
        err = float((out.float() - want).norm() / want.norm())
        print(
            f"splits {splits:2}: {ms * 1e3:8.1f} us, {nbytes / ms / 1e6:6.0f} GB/s, "
            f"{ms_torch / ms:.3f} of torch, rel err {err:.1e}"
        )


if __name__ == "__main__":
    main()
