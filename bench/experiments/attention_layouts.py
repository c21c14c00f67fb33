"""The inference attention over sequence-major q, k and v (Hugging Face's (B, H, L, D) views of
(B, L, H, D) projections), read in place, against the path of before: dense copies of the
three, the dense kernel, and the output's copy back to (B, L, H, D) (what Hugging Face's
`transpose(1, 2).contiguous()` did). The sequence-major kernel's blocks take their tiles
row-major over (B, L / TILE_M, H): one query tile of every head together, where the dense
kernel's take one head's query tiles together (its K and V shared in L2), so long sequences
show whether that order costs more than the copies. Also cuDNN's SDPA on the same views.
Run on the GPU machine: `PYTHONPATH=src python3 bench/experiments/attention_layouts.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

import fearless.ops as ops

SHAPES = [(4, 32, 8, 2048), (1, 32, 8, 8192), (2, 32, 32, 4096), (8, 32, 8, 1024)]  # B H Hkv L


def ms(fn: Callable[[], Any], reps: int = 20) -> float:
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def row(b: int, h: int, hk: int, length: int) -> list[float]:
    """The four times of one shape, causal, GQA, D 128, bf16."""
    qp, kp, vp = (
        torch.randn(b, length, n, 128, device="cuda", dtype=torch.bfloat16) for n in (h, hk, hk)
    )
    q, k, v = (x.transpose(1, 2) for x in (qp, kp, vp))
    qd, kd, vd = (x.contiguous() for x in (q, k, v))

    def in_place() -> Any:
        return ops.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    def copies() -> Any:
        out = ops.scaled_dot_product_attention(
            q.contiguous(), k.contiguous(), v.contiguous(), is_causal=True, enable_gqa=True
        )
        return out.transpose(1, 2).contiguous()

    def kernel() -> Any:
        return ops.scaled_dot_product_attention(qd, kd, vd, is_causal=True, enable_gqa=True)

    def cudnn() -> Any:
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=True, enable_gqa=True
            )

    with torch.no_grad():
        assert (in_place().float() - cudnn().float()).abs().max() < 5e-2
        return [ms(f) for f in (in_place, copies, kernel, cudnn)]


def main() -> None:
    print(f"{'B H Hkv L':>18} {'in place':>9} {'copies':>9} {'kernel':>9} {'cuDNN':>9}  (ms)")
    for shape in SHAPES:
        times = row(*shape)
        print(
            f"{' '.join(map(str, shape)):>18} " + " ".join(f"{t:9.3f}" for t in times), flush=True
        )


if __name__ == "__main__":
    main()
