"""Session 37: where `fused_linear_cross_entropy` loses to torch.compile in a training step.

The Llama-3-8B training step (2 layers, 4 x 2048 tokens, `decode_host_profile.py --train
--compile`, H100) took 94.5 ms on fearless against 79.9 ms for torch.compile over the same
patched layers with Hugging Face's loss: the fused loss's kernels took 53.6 ms (logits 15.9,
dh = G @ W 13.8, dW 16.0, the row kernel 7.9) where cuBLAS's GEMMs and Triton's fused
log-softmax took about 37. This times each part at one chunk of that step (4096 tokens,
H 4096, V 128256, bf16), per tuner configuration (the tuned function's body, no tuning),
beside torch (cuBLAS): the row kernel (loss and gradient in place; GB/s over its three
passes), the logits GEMM, dh's and dW's. Run on the GPU machine:
`EXP=lce_parts.py bash bench/h200_run.sh OUT exp`.
"""

from __future__ import annotations

import torch
from cuda_timing import events_ms

import fearless as fl
from fearless.ops.kernels_gemm import GEMM_CONFIGS, matmul_tuned
from fearless.ops.kernels_linear_ce import (
    CE_CONFIGS,
    LCE_GEMM_CONFIGS,
    cross_entropy_tuned,
    dw_tuned,
    logits_tuned,
)

M, H, V = 4096, 4096, 128256
TFLOP = 2 * M * H * V / 1e12


def row(name: str, ms: float, what: str) -> None:
    print(f"{name:58s} {ms:8.3f} ms  {what}", flush=True)


def gemm_rows(label: str, configs: list[dict], run, ref_ms: float) -> None:  # type: ignore[no-untyped-def]
    row(f"{label} torch (cuBLAS)", ref_ms, f"{TFLOP / ref_ms * 1e3:6.0f} TFLOP/s")
    for cfg in configs:
        try:
            ms = events_ms(lambda c=cfg: run(c), reps=5, warmup=2)
        except Exception as exc:
            print(f"{label} {cfg}: failed: {str(exc)[:120]}", flush=True)
            continue
        row(f"{label} {cfg}", ms, f"{TFLOP / ms * 1e3:6.0f} TFLOP/s, {ref_ms / ms:.2f} of cuBLAS")


def main() -> None:
    torch.manual_seed(0)
    bf = torch.bfloat16
    h = torch.randn(M, H, device="cuda", dtype=bf)
    w = torch.randn(V, H, device="cuda", dtype=bf) * 0.02
    logits = torch.randn(M, V, device="cuda", dtype=bf)
    target = torch.randint(0, V, (M,), device="cuda")
    fh, fw, flog = fl.asarray(h), fl.asarray(w), fl.asarray(logits)
    no_bias = fl.asarray(torch.zeros(1, device="cuda", dtype=bf))
    loss = fl.asarray(torch.empty(M, device="cuda"))
    scale = fl.asarray(torch.full((M,), 1.0 / M, device="cuda"))
    ftarget = fl.asarray(target)

    gb = 3 * M * V * 2 / 1e9
    for cfg in CE_CONFIGS:
        ms = events_ms(
            lambda c=cfg: cross_entropy_tuned.fn(flog, loss, ftarget, scale, -100, True, **c),
            reps=5,
            warmup=2,
        )
        row(f"row kernel {cfg}", ms, f"{gb / ms * 1e3:6.0f} GB/s (3 passes)")
    x32 = torch.randn(M, V, device="cuda", dtype=bf)

    def torch_ce() -> None:
        x = x32.detach().requires_grad_()
        torch.nn.functional.cross_entropy(x.float(), target).backward()

    row("row kernel torch eager (f32 log-softmax fwd + bwd)", events_ms(torch_ce, 5, 2), "")

    out = torch.empty(M, V, device="cuda", dtype=bf)
    fout = fl.asarray(out)
    ref = events_ms(lambda: torch.mm(h, w.t(), out=out), 5, 2)
    gemm_rows("logits", LCE_GEMM_CONFIGS,
              lambda c: logits_tuned.fn(fh, fw, no_bias, fout, False, **c), ref)  # fmt: skip

    dh = torch.empty(M, H, device="cuda", dtype=bf)
    fdh = fl.asarray(dh)
    ref = events_ms(lambda: torch.mm(logits, w, out=dh), 5, 2)
    gemm_rows("dh", GEMM_CONFIGS, lambda c: matmul_tuned.fn(flog, fw, fdh, **c), ref)

    dw = torch.zeros(V, H, device="cuda", dtype=bf)
    fdw = fl.asarray(dw)
    ref = events_ms(lambda: dw.addmm_(logits.t(), h), 5, 2)
    gemm_rows("dW", LCE_GEMM_CONFIGS,
              lambda c: dw_tuned.fn(flog, fh, fdw, fdw, False, False, **c), ref)  # fmt: skip


if __name__ == "__main__":
    main()
