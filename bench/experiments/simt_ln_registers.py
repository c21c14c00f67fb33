"""layer_norm with chunk copies (fearless_bench/kernels_simt_chunks.py) at several `max_registers`, on a
(65536 x 1024) f32 matrix next to the bench's Triton peer: ptxas gives the kernel 39 registers
unbounded (12 blocks of 128 per SM), 32 lets 16 fit (with a small spill).
`python3 bench/experiments/simt_ln_registers.py` on the GPU machine."""

from __future__ import annotations

import numpy as np
import torch

import fearless as fl
from fearless_bench import kernels_triton as KT
from fearless_bench.kernels_simt_chunks import (
    CHUNK_THREADS,
    CHUNK_WIDTH,
    CHUNKS,
    make_chunk_kernels,
)
from fearless_bench.timing import FULL, DeviceTimer

ROWS, COLS, EPS = 65536, 1024, 1e-5


def main() -> None:
    fl.set_target("cuda")
    x = torch.randn(ROWS, COLS, device="cuda")
    w = torch.randn(COLS, device="cuda")
    b = torch.randn(COLS, device="cuda")
    out = torch.empty_like(x)
    gb = 2 * x.numel() * 4 / 1e9
    timer = DeviceTimer(torch, FULL)
    eps = np.float32(EPS)
    ref = torch.nn.functional.layer_norm(x, (COLS,), w, b, EPS)
    t_tr = timer.time(KT.layer_norm_launch(x, w, b, EPS, out)).median
    print(f"triton              {t_tr:.4f} ms {gb / (t_tr * 1e-3):7.1f} GB/s")
    for regs in (None, 32, 40, 48):
        k = make_chunk_kernels(CHUNK_THREADS, CHUNKS, CHUNK_WIDTH, regs)["layer_norm"]
        prep = k.prepare(ROWS, CHUNK_THREADS)
        t = timer.time(lambda k=k, prep=prep: k(prep, x, w, b, eps, out)).median
        err = (out - ref).abs().max().item()
        print(
            f"max_registers={regs!s:5s} {t:.4f} ms {gb / (t * 1e-3):7.1f} GB/s "
            f"{t_tr / t:.2f} err {err:.1e}"
        )


if __name__ == "__main__":
    main()
