"""Does fearless inside torch.compile beat torch.compile alone at decode?

The models family measured Llama-3-8B's layers (2) decoding at batch 1: torch.compile 676.6
tokens/s against fearless's 473.4 (H100, session 26). A decode step is host-bound: Inductor
removes Hugging Face's Python between the kernels, which fearless's replay cannot. fearless's
operators are torch custom ops with fake kernels (`torch.ops.fearless`), so a patched model
also compiles with fullgraph: this times a decode step (ms per token, prefill of 1024, then 48
steps) of torch eager, torch.compile (default mode), the fearless patch, and the fearless patch
under torch.compile, on fresh copies of one model (the same random bf16 weights). Run on the GPU
machine (transformers installed): `PYTHONPATH=src python3 bench/experiments/decode_compiled.py`.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

# run as a script: its folder is first on sys.path
from decode_host_profile import NEW, decode, llama

from fearless import transformers as ft


def per_token(model: Any) -> float:
    """ms per decoded token, after two warm-up runs (tuning, compiles, graph capture)."""
    run = decode(model, NEW)
    run()
    run()
    return min(run() for _ in range(3))


def main() -> None:
    base = llama()
    forms: list[tuple[str, Any]] = [("torch eager", base)]
    forms.append(("torch.compile", torch.compile(copy.deepcopy(base))))
    patched = copy.deepcopy(base)
    ft.apply(patched)
    forms.append(("fearless", patched))
    both = copy.deepcopy(base)
    ft.apply(both)
    forms.append(("fearless + torch.compile", torch.compile(both)))
    for label, model in forms:
        ms = per_token(model)
        print(f"{label:26s} {ms:7.3f} ms per token  {1e3 / ms:8.1f} tokens/s", flush=True)


if __name__ == "__main__":
    main()
