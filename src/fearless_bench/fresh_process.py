"""Running a probe module of this package in a fresh process with its own cache folders, and
reading the one JSON line it prints: the compile family's and the tuning family's first calls,
the models family's measurements."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import fearless
from fearless import config


def environment(cache: str | Path | None, **extra: str) -> dict[str, str]:
    """This process's environment with this package and fearless importable, and every compile
    cache (fearless, Triton, cuTile Python) in a folder of its own under `cache` (None: the
    caches this process uses, as the models family's probes share them)."""
    folders = dict.fromkeys(
        str(Path(m.__file__ or "").resolve().parents[1]) for m in (fearless, sys.modules[__name__])
    )
    src = os.pathsep.join(folders)
    path = config.raw("PYTHONPATH")
    caches = {}
    if cache is not None:
        caches = {
            "FEARLESS_CACHE_DIR": str(Path(cache) / "fearless"),
            "TRITON_CACHE_DIR": str(Path(cache) / "triton"),
            "CUDA_TILE_CACHE_DIR": str(Path(cache) / "cutile"),
        }
    return {
        **config.child_environment(),
        "PYTHONPATH": f"{src}{os.pathsep}{path}" if path else src,
        **caches,
        **extra,
    }


def probe(module: str, argv: list[str], env: dict[str, str], timeout: float) -> dict[str, object]:
    """`python -m fearless_bench.<module> argv...` in a fresh process: the last JSON line it
    printed ({"seconds": s, ...} or {"skip": why}), else {"error": what}."""
    try:
        res = subprocess.run(
            [sys.executable, "-m", f"fearless_bench.{module}", *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"the probe ran past {timeout:.0f} s"}
    lines = [ln for ln in res.stdout.strip().splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"probe exit {res.returncode}: {tail}"[:500]}
    parsed: dict[str, object] = json.loads(lines[-1])
    return parsed
