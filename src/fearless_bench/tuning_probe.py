"""One operator's first call at a new size class, in a fresh process:
`python -m fearless_bench.tuning_probe IMPL OP DTYPE SHAPE [VARIANT] [--no-tables]
[--export PATH] [--extra JSON]` (SHAPE as `3000x5120`).

Prints one JSON line: {"seconds": ...} (the first call of the ops family's run for that spec,
synchronised: tuning, compiles and module loads included), or {"skip": reason}. The inputs, the
CUDA context and the imports are made before the clock starts. For fearless.ops, `--no-tables`
turns the tuning tables off (the shipped ones included), so the call tunes from nothing, and
`--export PATH` writes the winners it tuned as a table (`fl.autotune.export`), with their count
as "entries". family_tuning.py runs this with empty cache folders (fresh_process.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from .family_ops import BUILDERS
from .family_ops_base import Spec
from .harness import print_probe_result
from .model import FEARLESS_TILE, TILEGYM, Skip


def parse(argv: list[str]) -> tuple[str, Spec, bool, str | None]:
    """(impl, spec, tables off?, export path) from the command line."""
    p = argparse.ArgumentParser(prog="python -m fearless_bench.tuning_probe")
    p.add_argument("impl", choices=(FEARLESS_TILE, TILEGYM))
    p.add_argument("op")
    p.add_argument("dtype")
    p.add_argument("shape")
    p.add_argument("variant", nargs="?", default="")
    p.add_argument("--no-tables", action="store_true")
    p.add_argument("--export", default=None)
    p.add_argument("--extra", default="[]", help="the Spec's `extra` pairs, as JSON")
    a = p.parse_args(argv)
    shape = tuple(int(n) for n in a.shape.split("x"))
    extra = tuple((k, _tupled(v)) for k, v in json.loads(a.extra))
    return a.impl, Spec(a.op, a.dtype, shape, a.variant, extra), a.no_tables, a.export


def _tupled(value: Any) -> Any:
    """A JSON value with its lists back as tuples (a Spec's `extra` holds tuples)."""
    return tuple(_tupled(v) for v in value) if isinstance(value, list) else value


def first_call(impl: str, spec: Spec, torch: Any, no_tables: bool) -> Callable[[], Any]:
    """Everything up to the first call (inputs drawn, modules imported); returns the call."""
    bench = BUILDERS[spec.op](torch, spec)
    if impl == TILEGYM:
        from .peers import Peers

        cap = torch.cuda.get_device_capability()
        return bench.tilegym(Peers(f"sm_{cap[0]}{cap[1]}").tilegym().ops)
    from fearless import autotune_tables, ops

    call = bench.fearless(ops)
    if not no_tables:
        return call

    def untabled() -> Any:
        with autotune_tables.disabled():
            return call()

    return untabled


def measure(impl: str, spec: Spec, no_tables: bool, export: str | None) -> dict[str, Any]:
    """The first call's seconds (and, with `export`, the count of winners written)."""
    import torch

    if not torch.cuda.is_available():
        raise Skip("torch sees no GPU")
    if impl == FEARLESS_TILE:
        import fearless as fl

        ok, why = fl.cuda_status()
        if not ok:
            raise Skip(f"fearless cannot use the GPU: {why}")
    call = first_call(impl, spec, torch, no_tables)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    call()
    torch.cuda.synchronize()
    out: dict[str, Any] = {"seconds": time.perf_counter() - t0}
    if export is not None:
        import fearless as fl

        out["entries"] = fl.autotune.export(export)
    return out


def main(argv: list[str]) -> int:
    impl, spec, no_tables, export = parse(argv)
    return print_probe_result(lambda: measure(impl, spec, no_tables, export))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
