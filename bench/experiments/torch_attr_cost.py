"""Cost of reading a torch tensor's launch facts, CUDA against CPU (what a warm launch reads).

PYTHONPATH=src python3 bench/experiments/torch_attr_cost.py
"""

import timeit

import torch

for dev in ("cpu", "cuda"):
    t = torch.ones(1024, device=dev)
    g = {"t": t, "f32": torch.float32}
    for stmt in ("t.is_cuda", "t.get_device()", "t.dtype is f32", "t.is_contiguous()",
                 "t.data_ptr()", "t.shape", "type(t) is torch.Tensor"):  # fmt: skip
        g["torch"] = torch
        n = 200000
        us = min(timeit.repeat(stmt, globals=g, number=n, repeat=5)) / n * 1e6
        print(f"{dev:5} {stmt:28} {us:6.3f} us")
