"""The Tile IR bytecode of every Tile kernel specialisation a set of CPU tests builds, as one
digest each: a refactor of kernel source (a shared `@tile.function`, a helper moved between
modules, a parameter list declared once) that leaves every digest as it was hands tileiras the
same bytes, so it changes no GPU code and needs no GPU run to show that. A digest that moves
names the kernel and specialisation whose GPU code changed.

    .venv/bin/python tools/kernel_digests.py OUT.json [pytest arguments ...]
    .venv/bin/python tools/kernel_digests.py --compare BEFORE.json AFTER.json

The first form runs pytest in this process (no xdist) with the IR builder that
`tile/compiles.py` calls wrapped: each tile IR the tests build, on the simulator as on a GPU,
is lowered to bytecode for sm_90
(backends/tileir/lower.py, which writes no source locations) and recorded under its kernel's
name, signature, hints and the plain values its factory closed over (the attention backward's
`causal`, say): the set of digests built under that key (a closed-over dtype or tile function
is not in it, so a key may still hold several). Tuning is off (FEARLESS_AUTOTUNE=0, each tuned
function's first configuration) unless the environment says otherwise, since the simulator's
timings would choose which configurations a run builds. It refuses (exit 2) to run where
`fearless` imports from another checkout than its own (an editable install of the main clone
used from a second one: PYTHONPATH=<this checkout>/src then). The second form prints what
differs and exits 1 when anything does. Needs the cuda-tile encoders (the bytecode), not tileiras.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any


def record(out: Path, pytest_args: list[str]) -> int:
    import importlib
    import os

    import pytest

    import fearless

    here = Path(__file__).resolve().parents[1] / "src"
    if here not in Path(fearless.__file__).resolve().parents:
        # an editable install of another checkout (the .venv of the main clone, used from a
        # second clone) would record that checkout's kernels: a before/after pair of such runs
        # compares one tree with itself and proves nothing (session 39)
        print(
            f"kernel_digests: fearless imports from {Path(fearless.__file__).parent}, not from "
            f"this checkout's {here}; run with PYTHONPATH={here}",
            file=sys.stderr,
        )
        return 2
    from fearless.backends.tileir import cuda_tile as tileir
    from fearless.backends.tileir.lower import lower_to_bytecode

    # the module that calls the IR builder (tile/compiles.py's per-kernel compile cache),
    # imported by name as the other modules of fearless.tile
    kernel_module = importlib.import_module("fearless.tile.compiles")
    version = tileir.bytecode_version()
    os.environ.setdefault("FEARLESS_AUTOTUNE", "0")
    digests: dict[str, set[str]] = {}
    build = kernel_module.build_ir

    def recording(src: Any, signature: Any, hints: Any = None) -> Any:
        ir = build(src, signature, hints)
        code = lower_to_bytecode(ir, version, "sm_90")
        key = f"{ir.name} {signature} {hints}{_flags(src)}"
        digests.setdefault(key, set()).add(hashlib.sha256(code).hexdigest()[:16])
        return ir

    setattr(kernel_module, "build_ir", recording)  # noqa: B010 - a module attribute, replaced
    status = pytest.main(["-q", "-p", "no:xdist", "-p", "no:cacheprovider", *pytest_args])
    record = {k: sorted(v) for k, v in sorted(digests.items())}
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{len(digests)} kernel specialisations -> {out}")
    return int(status)


def _flags(src: Any) -> str:
    """The plain values (bools, ints, floats, strings, None) a kernel factory closed over,
    such as the attention backward's `causal`: one key per form of the kernel."""
    plain = (bool, int, float, str, type(None))
    values = {k: v for k, v in sorted(src.closure.items()) if isinstance(v, plain)}
    return f" {values}" if values else ""


def compare(before: Path, after: Path) -> int:
    a, b = _read(before), _read(after)
    changed = [k for k in a.keys() & b.keys() if a[k] != b[k]]
    only_a, only_b = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
    for k in sorted(changed):
        print(f"changed  {k}")
    for k in only_a:
        print(f"before only  {k}")
    for k in only_b:
        print(f"after only   {k}")
    same = len(a.keys() & b.keys()) - len(changed)
    print(f"{same} the same, {len(changed)} changed, {len(only_a)} + {len(only_b)} unmatched")
    return 1 if changed or only_a or only_b else 0


def _read(path: Path) -> dict[str, list[str]]:
    """A record, each key's digests as a sorted list (a single digest read as a list of one)."""
    raw = json.loads(path.read_text())
    return {k: sorted([v] if isinstance(v, str) else v) for k, v in raw.items()}


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "--compare":
        return compare(Path(argv[1]), Path(argv[2]))
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    return record(Path(argv[0]), argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
