"""The models family: Hugging Face models end to end on fearless.transformers against torch eager
(SDPA), torch.compile of the unpatched model, TileGym's patch and Liger-Kernel's patch; and the
patched model under torch.compile (`fearless+compile`, fearless's own, as `fearless-tile` is:
no peer), the form that answers "faster than torch.compile?" for a user who compiles anyway.

Per model of models_configs.MODELS (real layer dimensions, 2 to 4 layers, random bf16 weights)
and per workload (a training step, forward, backward and AdamW, at 4 x 2048 and 1 x 8192
tokens; a prefill of 4 x 2048; greedy decode with a KV cache over a 1024-token prompt at batch
1 and 32), each implementation runs in a fresh process (models_probe.py), so that its peak
memory is its own and one patch never leaks into another's model. Case
`models_<model>_<workload>`; records in seconds per step (per generated token in decode),
tokens/s as the value and `peak_bytes` the peak memory over the timed steps; the note gives the
first (tuning, compiling) step's time and the training losses. The ratio is the best peer's
time over the implementation's (report.py also tabulates the peak memory against the least of
the peers'; figures.py draws one comparison per model).

A peer the machine lacks (TileGym or Liger-Kernel not installed, no patch for the model type,
a model type transformers lacks) is a skipped record with the reason. `--quick` runs Llama at
QUICK_WORKLOADS with fewer timed steps. The family stops starting probes after
FEARLESS_BENCH_MODELS_BUDGET_S seconds (default BUDGET_S; 0: no limit) so that one run fits a
10-minute device command; the probes left are skipped records naming the `--cases` pattern
that runs them. Goals on the H200 (issue text): a training step >= 1.2x torch eager and >= 1.0x
torch.compile and the best of TileGym and Liger, peak training memory <= the best of them,
decode tokens/s >= torch eager and >= TileGym.
"""

from __future__ import annotations

import time
from typing import Any

from fearless import config

from . import fresh_process
from .harness import Ctx
from .model import (
    FEARLESS_COMPILED,
    FEARLESS_TILE,
    LIGER,
    TILEGYM,
    TORCH,
    TORCH_COMPILE,
    Record,
    skipped,
    unmeasured,
)
from .models_configs import (
    MODELS,
    QUICK_MODELS,
    QUICK_WORKLOADS,
    WORKLOADS,
    ModelSpec,
    Workload,
    case_name,
)
from .peers import Peers

FAMILY = "models"
BUDGET_ENV = "FEARLESS_BENCH_MODELS_BUDGET_S"
BUDGET_S = 300.0
TIMEOUT_S = 240  # one probe: import, build, warm-up (tuning, compiles) and the timed steps
CASES = tuple(case_name(m, w) for m in MODELS for w in WORKLOADS)
# The baseline first, so that a budget running out mid-case leaves the ratios a reference.
IMPLS = (TORCH, FEARLESS_TILE, FEARLESS_COMPILED, TORCH_COMPILE, TILEGYM, LIGER)


def chosen(selected: set[str], quick: bool) -> list[tuple[ModelSpec, Workload]]:
    """The (model, workload) pairs to run, in the family's order; --quick keeps QUICK_MODELS
    at QUICK_WORKLOADS."""
    out = []
    for spec in MODELS:
        for w in WORKLOADS:
            if case_name(spec, w) not in selected:
                continue
            if quick and (spec.tag not in QUICK_MODELS or w.name not in QUICK_WORKLOADS):
                continue
            out.append((spec, w))
    return out


def probe(impl: str, spec: ModelSpec, workload: Workload, quick: bool) -> dict[str, Any]:
    """models_probe.py for one implementation, in a fresh process sharing this run's caches."""
    argv = [impl, spec.tag, workload.name, *(["--quick"] if quick else [])]
    return fresh_process.probe(
        "models_probe", argv, fresh_process.environment(None, PYTHONUNBUFFERED="1"), TIMEOUT_S
    )


def params(spec: ModelSpec, workload: Workload) -> dict[str, Any]:
    return {
        "model": spec.title,
        "tag": spec.tag,
        "workload_name": workload.name,
        "layers": spec.layers,
        **workload.params(),
    }


def record(spec: ModelSpec, workload: Workload, impl: str, result: dict[str, Any]) -> Record:
    """One implementation's record from its probe's result."""
    case, p = case_name(spec, workload), params(spec, workload)
    if (refused := unmeasured(case, FAMILY, impl, result, **p)) is not None:
        return refused
    rec = Record(case, FAMILY, impl, "ok", params=p)
    rec.time = float(result["seconds"])
    rec.time_unit, rec.metric = "s", "tokens/s"
    rec.value = float(result["tokens"]) / rec.time
    low, high = result.get("spread") or (rec.time, rec.time)
    rec.spread, rec.reps = (float(low), float(high)), int(result.get("reps") or 1)
    peak = result.get("peak_bytes")
    rec.peak_bytes = int(peak) if peak is not None else None
    first = float(result.get("first_s") or 0.0)
    unit = "decode run (prompt prefill included)" if workload.kind == "decode" else "step"
    notes = [f"first {unit} {first:.1f} s (tuning and compiles)"]
    losses = result.get("losses") or []
    if losses:
        notes.append(f"loss {losses[0]:.4f} first, {losses[-1]:.4f} last")
    rec.note = "; ".join(n for n in (*spec.notes, result.get("note"), *notes) if n)
    return rec


def format_record(r: Record) -> str:
    """The progress line of one record: tokens/s, time per step and peak memory."""
    head = f"{r.case:<40} {r.impl:<14}"
    if r.status != "ok" or r.time is None or r.value is None:
        return f"{head} {r.status}: {r.reason}"
    peak = f" {r.peak_bytes / 2**30:7.2f} GiB" if r.peak_bytes is not None else ""
    return f"{head} {r.value:11.1f} tokens/s {r.time * 1e3:10.2f} ms{peak}"


def run(ctx: Ctx, selected: set[str]) -> list[Record]:
    budget = config.bench_models_budget(BUDGET_S)
    start = time.perf_counter()
    out: list[Record] = []
    for spec, workload in chosen(selected, ctx.quick):
        case = case_name(spec, workload)
        for impl in IMPLS:
            spent = time.perf_counter() - start
            if budget and spent > budget:
                why = (
                    f"the models family's time budget ({budget:.0f} s, {BUDGET_ENV}) ran out; "
                    f"run this case with --cases '{case}'"
                )
                rec = skipped(case, FAMILY, impl, why, **params(spec, workload))
            else:
                rec = record(spec, workload, impl, probe(impl, spec, workload, ctx.quick))
            ctx.log(format_record(rec))
            out.append(rec)
            ctx.checkpoint(out)  # a run stopped mid-family keeps what it measured
    return out


def dry_run(peers: Peers, selected: set[str]) -> list[Record]:
    """The models need the GPU; tests/test_bench_models.py runs the probe's measurement on the
    simulator at toy size, and the ops family's dry run checks the kernels."""
    return []
