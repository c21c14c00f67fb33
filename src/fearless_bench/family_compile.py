"""First-call compile time and disk-cache hit time, per track and per peer, in fresh processes.

For each implementation, one new temporary folder serves as every compile cache (fearless,
Triton, cuTile Python); `compile_probe.py` then runs in `runs` fresh processes one after the
other. The first finds the cache empty: its first call compiles (`compile_first_call`). The
others find what the first stored: their first call is a disk-cache hit
(`compile_cache_hit`, the median of those runs). NVRTC keeps no disk cache, so its hit case is
skipped with that reason. Goals (DESIGN section 6): SIMT <= 0.3 s, Tile <= 0.8 s, hit <= 20 ms.
"""

from __future__ import annotations

import statistics
import tempfile

from . import fresh_process
from .harness import Ctx, format_line
from .model import (
    CUDA_CPP,
    CUTILE,
    FEARLESS_SIMT,
    FEARLESS_TILE,
    TRITON,
    Record,
    failed,
    skipped,
    unmeasured,
)
from .peers import Peers

FAMILY = "compile"
FIRST, HIT = "compile_first_call", "compile_cache_hit"
CASES = (FIRST, HIT)
IMPLS = (FEARLESS_SIMT, FEARLESS_TILE, CUDA_CPP, TRITON, CUTILE)
TIMEOUT_S = 180


def probe(impl: str, env: dict[str, str]) -> dict[str, object]:
    """One fresh process's first call: {"seconds": s} or {"skip": why} or {"error": what}."""
    return fresh_process.probe("compile_probe", [impl], env, TIMEOUT_S)


def run(ctx: Ctx, selected: set[str]) -> list[Record]:
    if not selected & set(CASES):
        return []
    runs = max(2, ctx.budget.compile_runs)
    records: list[Record] = []
    for impl in IMPLS:
        with tempfile.TemporaryDirectory(prefix="fearless-bench-") as cache:
            env = fresh_process.environment(cache)
            results = [probe(impl, env)]
            if "seconds" in results[0] and HIT in selected and impl != CUDA_CPP:
                results += [probe(impl, env) for _ in range(runs - 1)]
        records += _records(impl, results, selected)
    for r in records:
        ctx.log(format_line(r))
    return records


def _records(impl: str, results: list[dict[str, object]], selected: set[str]) -> list[Record]:
    first = results[0]
    out: list[Record] = []
    params = {"kernel": "vecadd", "processes": len(results)}
    for case in (FIRST, HIT):
        if case not in selected:
            continue
        if (refused := unmeasured(case, FAMILY, impl, first, **params)) is not None:
            out.append(refused)
        elif case == HIT and impl == CUDA_CPP:
            out.append(skipped(case, FAMILY, impl, "NVRTC keeps no disk cache", **params))
        else:
            rest = results[1:]
            bad = [r for r in rest if "seconds" not in r]
            if case == HIT and bad:
                why = bad[0].get("error") or bad[0].get("skip")
                out.append(
                    failed(case, FAMILY, impl, f"a cache-hit process failed: {why}", **params)
                )
                continue
            secs = [float(r["seconds"]) for r in (rest if case == HIT else [first])]  # type: ignore[arg-type]
            rec = Record(case, FAMILY, impl, "ok", params=dict(params))
            rec.time = statistics.median(secs)
            rec.time_unit, rec.metric, rec.value = "s", "s", rec.time
            rec.spread = (min(secs), max(secs))
            rec.reps = len(secs)
            out.append(rec)
    return out


def dry_run(peers: Peers, selected: set[str]) -> list[Record]:
    """Compile times need the GPU run (first calls load modules); nothing to simulate here."""
    return []
