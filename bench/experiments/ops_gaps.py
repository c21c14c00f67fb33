"""The ops cases below 0.95 of TileGym at 5cfcd8a (bench/results/h200-2026-12-04-session11),
every configuration of each one's tuner, by the tuner's own clock (spin-gated: GPU time even
where the host path is longer). Tuning runs in a fresh cache folder so that every case is
timed, not read back. Compare with `fearless bench --cases` of the same cases for TileGym's and
torch's figures. Run on the GPU machine: `PYTHONPATH=src python3 bench/experiments/ops_gaps.py`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

os.environ["FEARLESS_CACHE_DIR"] = tempfile.mkdtemp(prefix="fearless-gaps-")

import torch

from fearless import ops
from fearless.ops import kernels_activation as ka
from fearless.ops import kernels_layout as kl
from fearless.ops import kernels_rows as kr


def r(*shape: int, dt: Any = torch.bfloat16) -> torch.Tensor:
    return torch.randn(*shape, device="cuda").to(dt)


# (name, bytes moved, the op call, its tuned launch function)
CASES: list[tuple[str, int, Callable[[], Any], Any]] = []


def case(name: str, nbytes: int, call: Callable[[], Any], tuned: Any) -> None:
    CASES.append((name, nbytes, call, tuned))


x1 = r(30000, 16384)
w1, b1 = r(16384), r(16384)
case(
    "layer_norm bf16 30000x16384",
    4 * x1.numel(),
    lambda: ops.layer_norm(x1, (16384,), w1, b1),
    kr.layer_norm_tuned,
)
x2 = r(4096, 16384)
case(
    "layer_norm bf16 4096x16384",
    4 * x2.numel(),
    lambda: ops.layer_norm(x2, (16384,), w1, b1),
    kr.layer_norm_tuned,
)
x3, w3 = r(4096, 16384, dt=torch.float16), r(16384, dt=torch.float16)
case(
    "rms_norm f16 4096x16384",
    4 * x3.numel(),
    lambda: ops.rms_norm(x3, (16384,), w3),
    kr.rms_norm_tuned,
)
case("transpose bf16 4096x16384", 4 * x2.numel(), lambda: ops.transpose(x2), kl.transpose_tuned)
x4 = r(16384, 8192, dt=torch.float16)
case("silu_and_mul f16 16384x4096", 3 * x4.numel(), lambda: ops.silu_and_mul(x4), ka.gated_tuned)
x5 = r(1 << 26, dt=torch.float16)
case("gelu f16 2^26", 4 * x5.numel(), lambda: ops.gelu(x5), ka.elementwise_tuned)


def main() -> None:
    for name, nbytes, call, tuned in CASES:
        tuned.timings.clear()
        call()
        torch.cuda.synchronize()
        print(f"== {name}")
        for times in tuned.timings.values():
            ranked = sorted(zip(tuned.configs, times, strict=True), key=lambda ct: ct[1] or 1e9)
            for cfg, t in ranked:
                line = "failed" if t is None else f"{t * 1e6:8.1f} us, {nbytes / t / 1e9:6.0f} GB/s"
                print(f"  {line}  {cfg}")


if __name__ == "__main__":
    main()
