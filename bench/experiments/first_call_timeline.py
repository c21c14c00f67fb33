"""Experiment: where a first call at a new size class spends its time, compile by compile.

    PYTHONPATH=src python bench/experiments/first_call_timeline.py OUT.json [--budget S|none] \
        fearless-tile layer_norm bf16 3000x5120 --no-tables

Runs fearless_bench.tuning_probe (the tuning family's fresh-process first call; give it empty
FEARLESS_CACHE_DIR and CUDA_TILE_CACHE_DIR) and writes to OUT.json each tileiras compile of a
compile-ahead pass ("compile", worker thread, start, end, kernel), each compile a launch made
itself, in its own thread ("compile-now": what no pass had started), each op's first-call pass
("pass", the host time of running the op without launching), each timed configuration
("measure") and each key's whole tuning ("tune"), in seconds from the start of the first call. `--budget` sets autotune_timing.COMPILE_BUDGET_S for the run (`none`: wait for every
compile). bench/results/h100-2026-12-06-session21/NOTES.md reads its output.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

LOG: list[tuple[str, str, float, float, str]] = []
T0 = [time.perf_counter()]


def _logged(kind: str, fn: Callable[..., Any], what: Callable[..., str]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            end = time.perf_counter()
            name = threading.current_thread().name
            LOG.append((kind, name, start - T0[0], end - T0[0], what(*args)))

    return wrapper


def main(argv: list[str]) -> int:
    import fearless.autotune_ahead as autotune_ahead
    import fearless.autotune_timing as timing
    import fearless.autotuning as autotuning
    import fearless.tile.compile_ahead as ahead
    from fearless_bench import tuning_probe

    out, rest = argv[0], argv[1:]
    if rest[:1] == ["--budget"]:
        timing.COMPILE_BUDGET_S = None if rest[1] == "none" else float(rest[1])
        rest = rest[2:]
    import importlib

    kernel = importlib.import_module("fearless.tile.kernel")  # `tile.kernel` is the decorator

    def name(ir: Any, *_: Any) -> str:
        return str(getattr(ir, "name", ""))[:60]

    ahead.compile_cubin = _logged("compile", ahead.compile_cubin, name)
    kernel.compile_cubin = _logged("compile-now", kernel.compile_cubin, name)
    autotune_ahead.compile_ahead_of = _logged("pass", autotune_ahead.compile_ahead_of, lambda *a: "")
    autotuning.measure = _logged("measure", autotuning.measure, lambda *a: "")
    autotuning.Autotuned._tune = _logged(  # type: ignore[method-assign]
        "tune", autotuning.Autotuned._tune, lambda self, *a: self.name
    )
    first_call = tuning_probe.first_call

    def clocked(*args: Any, **kwargs: Any) -> Callable[[], Any]:
        call = first_call(*args, **kwargs)

        def started() -> Any:
            T0[0] = time.perf_counter()
            return call()

        return started

    tuning_probe.first_call = clocked
    try:
        return tuning_probe.main(rest)
    finally:
        Path(out).write_text(json.dumps(LOG, indent=0))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
