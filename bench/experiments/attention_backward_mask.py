"""Session 29: the attention backward's causal mask on the diagonal tiles only (459aa5f: a
run-time `if`, as the forward's) against the mask on every tile (before), in two processes
of this script, one per form; torch's SDPA (cuDNN or flash) beside them.

Per shape (f16, causal and full): the training call (forward keeping lse, then
`.backward(dout)`) and the forward alone under no_grad, each by CUDA events over REPS calls
after a warm-up (the first calls tune and compile); backward = training - forward.

Run on the GPU machine: `EXP=attention_backward_mask.py bash bench/h200_run.sh OUT exp`."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from cuda_timing import events_ms

SHAPES = ((4, 32, 1024, 64), (4, 32, 1024, 128), (4, 16, 4096, 128), (2, 32, 8192, 64))
REPS = 20


def _every_tile() -> None:
    """Put back the backward's `scores` of before 459aa5f: the mask on every tile."""
    import fearless as fl
    from fearless import tile
    from fearless.ops import kernels_attention_backward_tiles as KB

    masked_scores = KB.masked_scores

    @tile.function
    def scores(qt, kt, i, j, s_len, TILE_M, TILE_N, qk_scale, causal, even_k):
        s = tile.mma(qt, kt, tile.zeros((TILE_M, TILE_N), fl.f32))
        s = s * qk_scale
        if causal or not even_k:
            rows = (i * TILE_M + tile.arange(TILE_M))[:, None]
            keys = j * TILE_N + tile.arange(TILE_N)[None, :]
            s = masked_scores(s, rows, keys, s_len, 0, 0, causal, False, False)
        return s

    KB.scores = scores


def _shape(b: int, h: int, n: int, d: int, form: str) -> None:
    """One shape's lines: fearless (and, in the "diagonal" process, torch), causal and full."""
    import torch

    from fearless import ops

    q, k, v = (
        torch.randn(b, h, n, d, device="cuda", dtype=torch.float16).requires_grad_()
        for _ in range(3)
    )
    dout = torch.randn(b, h, n, d, device="cuda", dtype=torch.float16)
    impls: list[tuple[str, Any]] = [("fearless", ops.scaled_dot_product_attention)]
    if form == "diagonal":
        impls.append(("torch", torch.nn.functional.scaled_dot_product_attention))
    for causal in (True, False):
        for name, f in impls:

            def train(f: Any = f, causal: bool = causal) -> None:
                q.grad = k.grad = v.grad = None
                f(q, k, v, is_causal=causal).backward(dout)

            def forward(f: Any = f, causal: bool = causal) -> None:
                with torch.no_grad():
                    f(q, k, v, is_causal=causal)

            tr, fw = events_ms(train), events_ms(forward)
            label = f"{b}x{h}x{n}x{d} {'causal' if causal else 'full'}"
            print(
                f"{label:24s} {name:8s} mask on {form:8s}: training {tr:.3f} ms, "
                f"forward {fw:.3f}, backward {tr - fw:.3f}",
                flush=True,
            )


def run(form: str) -> None:
    import torch

    if form == "every":
        _every_tile()
    torch.manual_seed(0)
    for shape in SHAPES:
        _shape(*shape, form)
        torch.cuda.empty_cache()


def main() -> None:
    if len(sys.argv) > 1:
        run(sys.argv[1])
        return
    for form in ("diagonal", "every"):
        subprocess.run([sys.executable, __file__, form], check=False)


if __name__ == "__main__":
    main()
