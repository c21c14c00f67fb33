"""Where the host time of one fearless.ops call goes, on torch CUDA tensors of a small shape
(the kernel itself is a few microseconds): the whole operator against torch's own, the Tile
launch alone, and the wrapper's pieces, then a cProfile of the hottest operators.
Run on the GPU machine: `python3 bench/experiments/ops_overhead.py [--profile]`."""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
from collections.abc import Callable
from typing import Any

import torch
from launch_floor import per_launch  # this folder: the script's own sys.path entry

import fearless as fl
from fearless import ops
from fearless.ops import _io
from fearless.ops.kernels_activation import make_unary
from fearless.ops.kernels_rows import kernel_of


def main() -> None:
    fl.set_target("cuda")
    x = torch.randn(64, 256, device="cuda")
    xh = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    g = torch.randn(64, 512, device="cuda")
    w = torch.randn(256, device="cuda")
    b = torch.randn(256, device="cuda")
    m = torch.randn(128, 128, device="cuda")
    xf = fl.asarray(x)
    outf = fl.empty(x.shape, dtype=fl.f32)
    unary = kernel_of(make_unary, "relu", fl.f32)
    part = _io.view(outf, (x.numel(),)).partition((1024,))
    xflat = _io.view(xf, (x.numel(),))

    rows: list[tuple[str, Callable[[], Any]]] = [
        ("torch.relu", lambda: torch.relu(x)),
        ("ops.relu", lambda: ops.relu(x)),
        ("torch.ops.fearless.relu", lambda: torch.ops.fearless.relu(x)),
        ("tile kernel(part, x) warm", lambda: unary(part, xflat)),
        ("operand(torch)", lambda: _io.operand(x, "relu", "x", _io.FLOATS)),
        ("torch.empty_like", lambda: torch.empty_like(x)),
        ("from_torch", lambda: _io.from_torch(x)),
        ("torch.softmax", lambda: torch.softmax(x, -1)),
        ("ops.softmax", lambda: ops.softmax(x)),
        ("ops.softmax bf16", lambda: ops.softmax(xh)),
        ("F.layer_norm", lambda: torch.nn.functional.layer_norm(x, (256,), w, b)),
        ("ops.layer_norm", lambda: ops.layer_norm(x, (256,), w, b)),
        ("ops.rms_norm", lambda: ops.rms_norm(x, (256,), w)),
        ("ops.silu_and_mul", lambda: ops.silu_and_mul(g)),
        ("torch.matmul", lambda: torch.matmul(m, m)),
        ("ops.matmul", lambda: ops.matmul(m, m)),
        ("ops.gelu", lambda: ops.gelu(x)),
        ("ops.dropout", lambda: ops.dropout(x, 0.1)),
        ("ops.transpose", lambda: ops.transpose(m)),
    ]
    width = max(len(n) for n, _ in rows)
    for name, fn in rows:
        print(f"{name:<{width}}  {per_launch(fn, 5000):8.2f} us/call", flush=True)
    part.unpartition()

    if "--profile" in sys.argv:
        for name, fn in [
            ("ops.relu", lambda: ops.relu(x)),
            ("ops.softmax", lambda: ops.softmax(x)),
        ]:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(3000):
                fn()
            prof.disable()
            torch.cuda.synchronize()
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(28)
            print(f"=== {name}: 3000 calls\n{s.getvalue()}")


if __name__ == "__main__":
    main()
