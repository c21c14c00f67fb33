"""The ops family's cases (family_ops.py runs them, family_ops_dry.py dry-runs them): TileGym's
benchmark grids as `Spec`s, the constants the runs share, and bench_rope's rotary tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .family_ops_more import more_specs
from .model import FEARLESS_TILE, TILEGYM, TORCH

FAMILY = "ops"
EPS_RMS = 1e-5  # bench_rmsnorm's
EPS_LN = 1e-6  # bench_layernorm's
P_DROP = 0.5
SEED = 1234
BUDGET_ENV = "FEARLESS_BENCH_OPS_BUDGET_S"
BUDGET_S = 420.0
LEGACY_LN_ROWS = 4096
DEVICE = "cuda"  # where the inputs are drawn (the CPU tests check the builders with "cpu")
IMPLS = (FEARLESS_TILE, TILEGYM, TORCH)

POW2_N = tuple(2**i for i in range(10, 15))  # 1024 ... 16384
ELEMENTWISE_NS = tuple(2**i for i in range(20, 28, 2))  # bench_dropout's
GEMM_BATCHED = tuple(2**i for i in range(10, 13))  # 1024 ... 4096
ATTENTION_SEQ = (1024, 2048, 4096, 8192)


@dataclass(frozen=True)
class Spec:
    """One case: an op of fearless.ops at one input shape and dtype.

    `shape` is the main input's shape, except for the GEMMs: (M, N, K) for matmul, (batch or
    groups, M, N, K) for bmm and group_gemm. `variant` is gelu's and geglu's approximation, and
    attention's "causal", "full" or "decode" (then `shape` is (B, H, S, D): one query per
    head)."""

    op: str
    dtype: str
    shape: tuple[int, ...]
    variant: str = ""
    extra: tuple[tuple[str, Any], ...] = ()  # an op's own parameters, merged into params()

    @property
    def group(self) -> str:
        """The op, variant and dtype: one dry-run record, and `--quick`'s unit."""
        return "_".join(p for p in ("ops", self.op, self.variant, self.dtype) if p)

    @property
    def grid(self) -> str:
        """One line of TileGym's grids: the group, and layer_norm's row count (two grids)."""
        return f"{self.group}_{self.shape[0]}" if self.op == "layer_norm" else self.group

    @property
    def name(self) -> str:
        if self.op == "matmul":
            tag = str(self.shape[0])
        elif self.op in ("bmm", "group_gemm"):
            tag = f"{self.shape[0]}x{self.shape[1]}"
        else:
            tag = "x".join(map(str, self.shape))
        return f"{self.group}_{tag}"

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "shape": list(self.shape), "dtype": self.dtype}
        if self.extra:  # the variant is then a tag of the case name, its meaning in `extra`
            out.update(self.extra)
        elif self.variant and self.op == "attention":
            out["is_causal"] = self.variant == "causal"
            out["decode"] = self.variant == "decode"
        elif self.variant:
            out["approximate"] = self.variant
        if self.op == "layer_norm":
            legacy = self.shape[0] == LEGACY_LN_ROWS
            out["tilegym_op"] = "layer_norm_legacy" if legacy else "persistent_layer_norm"
        return out


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
    out += _attention_specs()
    out += more_specs(Spec)
    return out


def _attention_specs() -> list[Spec]:
    from .family_ops_attention import attention_specs  # it imports Spec from here

    return attention_specs()


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
