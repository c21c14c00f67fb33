"""The ops family's vocabulary, shared by its case lists and its builders (family_ops.py,
family_ops_cases.py, family_ops_attention.py, family_ops_more.py, family_ops_ssm.py,
family_ops_dry.py): a case (`Spec`), a case's runs and reference (`Bench`), the checked forms
of several outputs (`Joined`) and of dropout's (`DropoutStats`), the input drawer (`randn`), the
dry run of a case through its GPU builder (`builder_dry_body`) and the constants more than one
of those modules reads.

`DEVICE` is the one place the inputs are drawn: every builder reads `family_ops_base.DEVICE`
when it runs (the CPU tests and the dry runs set it to "cpu"; `drawn_on` does so for a block).
This module imports none of the family's: each of them imports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

FAMILY = "ops"
DEVICE = "cuda"  # where the inputs are drawn (the CPU tests and the dry runs set "cpu")
EPS_RMS = 1e-5  # bench_rmsnorm's
EPS_LN = 1e-6  # bench_layernorm's
P_DROP = 0.5
SEED = 1234
LEGACY_LN_ROWS = 4096  # layer_norm's rows in TileGym's `layer_norm_legacy` grid
POW2_N = tuple(2**i for i in range(10, 15))  # 1024 ... 16384
ATTENTION_SEQ = (1024, 2048, 4096, 8192)

_TORCH_DTYPES = {
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "f8e4m3fn": "float8_e4m3fn",
}


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


@dataclass
class Bench:
    """A case's three runs and its reference. `fearless` and `tilegym` take the operator
    module (fearless.ops, tilegym.ops) and return the run, so setup stays out of timing."""

    fearless: Callable[[Any], Callable[[], Any]]
    tilegym: Callable[[Any], Callable[[], Any]]
    torch: Callable[[], Any] | None  # None: torch has no such operator (fp8 matmul)
    reference: Callable[[], Any]
    bytes: int | None = None
    flops: int | None = None
    tilegym_note: str = "tilegym.ops, cutile backend"
    no_torch: str = ""  # why torch has no peer, where `torch` is None (default: no such op)


class Joined:
    """Several outputs (rope's q and k, group_gemm's list) checked as one: flattened and
    concatenated in order, as the reference is."""

    def __init__(self, parts: Any) -> None:
        self.parts = tuple(parts)

    def isnan(self) -> Any:
        import torch

        return torch.cat([p.isnan().reshape(-1) for p in self.parts])

    def double(self) -> Any:
        import torch

        return torch.cat([p.double().reshape(-1) for p in self.parts])


class DropoutStats:
    """Dropout's output y of x, checked as [1 + excess, 1 + dev] against [1, 1]: `excess` is how
    far the kept fraction lies beyond 6 sigma of 1 - p, `dev` the relative distance of y from
    keep * x / (1 - p). Both are 0 for any correct dropout, whatever its mask."""

    def __init__(self, y: Any, x: Any, p: float) -> None:
        self.y, self.x, self.p = y, x, p

    def isnan(self) -> Any:
        return self.y.isnan()

    def double(self) -> Any:
        import torch

        y, p = self.y.double().reshape(-1), self.p
        keep = y != 0
        sigma = math.sqrt(p * (1 - p) / y.numel())
        excess = ((keep.double().mean() - (1 - p)).abs() - 6 * sigma).clamp(min=0)
        scaled = self.x.double().reshape(-1) / (1 - p)
        dev = (y - keep * scaled).norm() / scaled.norm()
        return torch.stack([1 + excess, 1 + dev])


def first(r: Any) -> Any:
    """An operator's output, or the first of its outputs where it returns a tuple."""
    return r[0] if isinstance(r, tuple) else r


def randn(torch: Any, dt: str, *shape: int, std: float = 1.0) -> Any:
    """Standard normals (times `std`) of `shape` on DEVICE (read now), in dtype `dt`."""
    x = torch.randn(*shape, device=DEVICE)
    if std != 1.0:
        x = x * std
    return x.to(getattr(torch, _TORCH_DTYPES[dt]))


def builder_dry_body(build: Callable[[Any, Spec], Bench], s: Spec) -> Callable[[], float]:
    """The dry run of `s` (at its small shape) through its GPU run's builder `build`: CPU torch
    tensors, fearless.ops on the simulator, against the float64 reference (the relative
    error)."""

    def body() -> float:
        import torch

        from fearless import ops

        from .check import rel_err_torch

        with drawn_on("cpu"):
            torch.manual_seed(0)
            bench = build(torch, s)
            return rel_err_torch(bench.fearless(ops)(), bench.reference())

    return body


@contextmanager
def drawn_on(device: str) -> Iterator[None]:
    """DEVICE set to `device` inside the block (the dry runs build on "cpu")."""
    global DEVICE
    saved, DEVICE = DEVICE, device
    try:
        yield
    finally:
        DEVICE = saved
