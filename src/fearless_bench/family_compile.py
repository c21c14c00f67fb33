"""First-call compile time and disk-cache hit time, per track and per peer, in fresh processes.

For each implementation, one new temporary folder serves as every compile cache (fearless,
Triton, cuTile Python); `compile_probe.py` then runs in `runs` fresh processes one after the
other. The first finds the cache empty: its first call compiles (`compile_first_call`). The
others find what the first stored: their first call is a disk-cache hit
(`compile_cache_hit`, the median of those runs). NVRTC keeps no disk cache, so its hit case is
skipped with that reason. Goals (DESIGN section 6): SIMT <= 0.3 s, Tile <= 0.8 s, hit <= 20 ms.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import fearless
from fearless import config

from .harness import Ctx, format_line
from .model import CUDA_CPP, CUTILE, FEARLESS_SIMT, FEARLESS_TILE, TRITON, Record, failed, skipped
from .peers import Peers

FAMILY = "compile"
FIRST, HIT = "compile_first_call", "compile_cache_hit"
CASES = (FIRST, HIT)
IMPLS = (FEARLESS_SIMT, FEARLESS_TILE, CUDA_CPP, TRITON, CUTILE)
TIMEOUT_S = 180


def _env(cache: str) -> dict[str, str]:
    # The folders holding this package and fearless (one folder, src/, in a checkout).
    folders = dict.fromkeys(
        str(Path(m.__file__ or "").resolve().parents[1]) for m in (fearless, sys.modules[__name__])
    )
    src = os.pathsep.join(folders)
    path = config.raw("PYTHONPATH")
    return {
        **config.child_environment(),
        "PYTHONPATH": f"{src}{os.pathsep}{path}" if path else src,
        "FEARLESS_CACHE_DIR": str(Path(cache) / "fearless"),
        "TRITON_CACHE_DIR": str(Path(cache) / "triton"),
        "CUDA_TILE_CACHE_DIR": str(Path(cache) / "cutile"),
    }


def probe(impl: str, env: dict[str, str]) -> dict[str, object]:
    """One fresh process's first call: {"seconds": s} or {"skip": why} or {"error": what}."""
    res = subprocess.run(
        [sys.executable, "-m", "fearless_bench.compile_probe", impl],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    lines = [ln for ln in res.stdout.strip().splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"probe exit {res.returncode}: {tail}"[:500]}
    parsed: dict[str, object] = json.loads(lines[-1])
    return parsed


def run(ctx: Ctx, selected: set[str]) -> list[Record]:
    if not selected & set(CASES):
        return []
    runs = max(2, ctx.budget.compile_runs)
    records: list[Record] = []
    for impl in IMPLS:
        with tempfile.TemporaryDirectory(prefix="fearless-bench-") as cache:
            env = _env(cache)
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
        if "skip" in first:
            out.append(skipped(case, FAMILY, impl, str(first["skip"]), **params))
        elif "error" in first:
            out.append(failed(case, FAMILY, impl, str(first["error"]), **params))
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
