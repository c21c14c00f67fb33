"""The ops family's cases (family_ops.py runs them, family_ops_dry.py dry-runs them): TileGym's
benchmark grids as `Spec`s (family_ops_base.py), family_ops_attention.py's, family_ops_more.py's
and family_ops_ssm.py's cases after the core ones, the run's budget and implementations, and
bench_rope's rotary tables."""

from __future__ import annotations

import numpy as np

from .family_ops_attention import attention_specs
from .family_ops_base import ATTENTION_SEQ, LEGACY_LN_ROWS, POW2_N, Spec
from .family_ops_more import more_specs
from .family_ops_ssm import ssm_specs
from .model import FEARLESS_TILE, TILEGYM, TORCH

BUDGET_ENV = "FEARLESS_BENCH_OPS_BUDGET_S"
BUDGET_S = 420.0
IMPLS = (FEARLESS_TILE, TILEGYM, TORCH)

ELEMENTWISE_NS = tuple(2**i for i in range(20, 28, 2))  # bench_dropout's
GEMM_BATCHED = tuple(2**i for i in range(10, 13))  # 1024 ... 4096


def specs() -> list[Spec]:
    """Every case, in run order: the cheap elementwise and layout ops first, the autotuned row
    and GEMM ops last (see the module doc for where each grid comes from)."""
    out: list[Spec] = []
    for dt in ("f16", "f32"):
        out += [Spec("relu", dt, (n,)) for n in ELEMENTWISE_NS]
    for approx in ("none", "tanh"):
        for dt in ("f16", "f32"):
            out += [Spec("gelu", dt, (n,), approx) for n in ELEMENTWISE_NS]
    for dt in ("f16", "f32"):
        out += [Spec("silu_and_mul", dt, (m, 2 * 2048)) for m in POW2_N]
    for batch in (1, 4, 8):
        for m in (128, 4096):
            for dt in ("f16", "bf16", "f32"):
                out += [Spec("swiglu", dt, (batch, m, n)) for n in POW2_N]
    for approx in ("none", "tanh"):
        out += [Spec("geglu", "bf16", (4, 512, 2 * n), approx) for n in (2048, 4096, 5120, 8192)]
    for dt in ("f16", "f32"):
        out += [Spec("dropout", dt, (n,)) for n in ELEMENTWISE_NS]
    out += [Spec("rope", "f16", (1, 16, s, 64)) for s in (4096, 8192, 16384, 32768)]
    for dt in ("f32", "bf16"):
        out += [Spec("transpose", dt, (4096, n)) for n in POW2_N]
    for op, dts in (("softmax", ("f32", "bf16")), ("rms_norm", ("f16", "bf16"))):
        for dt in dts:
            out += [Spec(op, dt, (4096, n)) for n in POW2_N]
    for m in (LEGACY_LN_ROWS, 30000):
        out += [Spec("layer_norm", "bf16", (m, n)) for n in (256, *POW2_N)]
    for dt in ("f16", "f8e4m3fn"):  # TileGym's matmul grid, and its fp8 grid (fp8 output)
        out += [Spec("matmul", dt, (n, n, n)) for n in POW2_N]
    for variant in ("causal", "full"):  # (B, H, L = S, D): prefill attention, as TileGym's fmha
        out += [Spec("attention", "bf16", (4, 32, n, 128), variant) for n in ATTENTION_SEQ]
    # (B, H, S, D) with one query per head: a decode step, as TileGym's fmha_decode
    out += [Spec("attention", "bf16", (8, 32, 2 * n, 128), "decode") for n in ATTENTION_SEQ]
    for op, counts in (("bmm", (2, 8)), ("group_gemm", (4, 16))):
        for count in counts:
            out += [Spec(op, "f16", (count, n, n, n)) for n in GEMM_BATCHED]
    out += attention_specs()
    out += more_specs()
    out += ssm_specs()
    return out


def quick_specs() -> list[Spec]:
    """`--quick`: the first and the last shape of each op, variant and dtype (and of each of
    layer_norm's two grids)."""
    groups: dict[str, list[Spec]] = {}
    for s in specs():
        groups.setdefault(s.grid, []).append(s)
    keep = {s.name for g in groups.values() for s in (g[0], g[-1])}
    return [s for s in specs() if s.name in keep]


CASES = tuple(s.name for s in specs())


def rotary_tables(seq: int, dim: int, base: float = 10000.0) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin (seq, dim) of bench_rope's `create_rotary_embeddings`: each half repeats."""
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    angles = np.outer(np.arange(seq, dtype=np.float64), freqs)
    return np.tile(np.cos(angles), 2), np.tile(np.sin(angles), 2)
