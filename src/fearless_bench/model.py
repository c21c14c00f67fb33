"""The suite's data model: implementations, result records, and the ratio to the best peer.

A *case* is one problem at one size ("vecadd", "gemm_f16_4096", "launch_3arrays"); each
*implementation* of it ("fearless-simt", "torch", ...) yields one `Record`: measured, skipped
with the reason, or failed (wrong result or an error) with what went wrong. Nothing is dropped:
a peer missing on a machine is a skipped record that says why.

Ratios: for every case, the best peer is the fastest `ok` record among the peers (every
implementation that is not fearless's own); each record's ratio is best-peer time / its time,
so above 1 is faster than every peer and the best peer itself reads 1.0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["ok", "skipped", "failed"]
Metric = Literal["GB/s", "TFLOP/s", "us/launch", "s", "tokens/s"]

# Implementation names, as they appear in results.json and the tables.
FEARLESS_SIMT = "fearless-simt"
FEARLESS_TILE = "fearless-tile"
FEARLESS_COMPILED = "fearless+compile"  # the models family: a patched model under torch.compile
CUTILE = "cutile"
TILEGYM = "tilegym"
LIGER = "liger-kernel"
TORCH_COMPILE = "torch.compile"
TRITON = "triton"
TORCH = "torch"
CUDA_CPP = "cuda-cpp"
RAW_LAUNCH = "raw-cuLaunchKernel"
CUDA_CORE = "cuda.core"

FEARLESS_IMPLS = (FEARLESS_SIMT, FEARLESS_TILE, FEARLESS_COMPILED)
# The column order of the tables and the plot.
IMPL_ORDER = (
    FEARLESS_SIMT,
    FEARLESS_TILE,
    FEARLESS_COMPILED,
    CUDA_CPP,
    TRITON,
    CUTILE,
    TILEGYM,
    LIGER,
    TORCH_COMPILE,
    TORCH,
    RAW_LAUNCH,
    CUDA_CORE,
)


class Skip(Exception):
    """Raised by an implementation that cannot run here; the message is the reason."""


@dataclass
class Record:
    """One implementation of one case."""

    case: str
    family: str
    impl: str
    status: Status
    params: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None  # why skipped or failed
    time: float | None = None  # median: ms for device cases, µs per launch, s for compiles
    # and model steps (per token in decode)
    time_unit: str = "ms"
    spread: tuple[float, float] | None = None  # 20th and 80th percentile, same unit
    reps: int | None = None
    metric: Metric | None = None
    value: float | None = None  # GB/s, TFLOP/s or tokens/s; the time itself otherwise
    rel_err: float | None = None
    ratio: float | None = None  # best-peer time / this time
    best_peer: str | None = None
    note: str | None = None  # what this implementation does differently (e.g. two kernels)
    peak_bytes: int | None = None  # peak device memory allocated (the models family)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["spread"] = list(self.spread) if self.spread is not None else None
        return out


def is_peer(impl: str) -> bool:
    return impl not in FEARLESS_IMPLS


def assign_ratios(records: list[Record]) -> None:
    """Fill `ratio` and `best_peer` of every ok record, case by case (see the module doc)."""
    by_case: dict[str, list[Record]] = {}
    for r in records:
        by_case.setdefault(r.case, []).append(r)
    for group in by_case.values():
        peers = [r for r in group if r.status == "ok" and is_peer(r.impl) and r.time]
        if not peers:
            continue
        best = min(peers, key=lambda r: r.time or float("inf"))
        for r in group:
            if r.status == "ok" and r.time and best.time:
                r.ratio = best.time / r.time
                r.best_peer = best.impl


def skipped(case: str, family: str, impl: str, reason: str, **params: Any) -> Record:
    return Record(case, family, impl, "skipped", params=params, reason=reason)


def failed(case: str, family: str, impl: str, reason: str, **params: Any) -> Record:
    return Record(case, family, impl, "failed", params=params, reason=reason)


def unmeasured(
    case: str, family: str, impl: str, result: dict[str, Any], **params: Any
) -> Record | None:
    """The record of a fresh-process probe's result that measured nothing (fresh_process.py's
    {"skip": why} is skipped; {"error": what}, or no "seconds", failed), else None."""
    if "skip" in result:
        return skipped(case, family, impl, str(result["skip"]), **params)
    if "error" in result or "seconds" not in result:
        return failed(case, family, impl, str(result.get("error", "no result")), **params)
    return None
