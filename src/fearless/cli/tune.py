"""`fearless tune`: run the fearless.ops tuners over a list of shapes and write a tuning table.

Tuning times kernels on the GPU, so without one the command refuses, unless `--simulator` asks
for the simulator (to test the command only: its timings say nothing about a GPU, and its
entries are keyed by arch "sim"). Every key is measured: tables are not read while it runs (the
winners this machine already keeps on disk for today's versions count as measured).

The shape list (`--shapes FILE`) is JSON, a list of {"op": "matmul", "dtype": "float16",
"shapes": [[128, 4096], [4096, 4096]]}, or {"op": "fmha", "dtype": "bfloat16", "shapes":
{"batch": 1, "q_heads": 32, "kv_heads": 8, "seq": 1024, "head_dim": 128}} for the operators
whose extents are named (cli/tune_ops.py lists each operator's names), with an optional "model"
tag; or text, one case a line: `matmul float16 128x4096 4096x4096`, `fmha bfloat16 batch=1
q_heads=32 kv_heads=8 seq=1024 head_dim=128` (`#` starts a comment). Without it, DEFAULT_CASES:
real models' dimensions (cli/tune_cases.py says which, how many, and how long they take).
`--ops a,b` keeps those operators' cases; `--models a,b` those of the named model groups (of
the built-in cases, or the cases of the shape list tagged with them).
The table is written after every case (merged into the file): a run cut short keeps its work;
whether `--out` can be written is checked before the first case.
Exit status: 0 written, 1 refused (no GPU, tuning off) or nothing tuned, 2 a bad shape list,
an unknown operator or model, or an `--out` that cannot be written.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .tune_cases import DEFAULT_CASES, DTYPES, MODEL_CASES, describe, model_cases, read_cases
from .tune_ops import OPS, run_case

HELP = "tune fearless.ops over a shape list on the GPU and write a tuning table"
__all__ = ["DEFAULT_CASES", "DTYPES", "HELP", "OPS", "add_arguments", "read_cases", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ops",
        nargs="+",
        metavar="OP",
        help=f"only these operators, by comma or space (of {', '.join(OPS)})",
    )
    parser.add_argument(
        "--models",
        nargs="+",
        metavar="MODEL",
        help=f"only these model groups, by comma or space (of {', '.join(MODEL_CASES)})",
    )
    parser.add_argument("--shapes", metavar="FILE", help="the shape list (JSON or text lines)")
    parser.add_argument(
        "--out", metavar="FILE", help="the table to write (default: fearless-tuning-<arch>.json)"
    )
    parser.add_argument(
        "--simulator",
        action="store_true",
        help="tune on the simulator: for testing the command only, its timings mean nothing",
    )


def _names(values: list[str] | None) -> list[str] | None:
    """`--ops a,b c` as [a, b, c]; None when not given."""
    if values is None:
        return None
    return [n for v in values for n in v.split(",") if n]


def select(
    cases: list[dict[str, Any]] | None, ops: list[str] | None, models: list[str] | None
) -> list[dict[str, Any]]:
    """The cases to run: the shape list's (None: the built-in ones, of `models` if given),
    those of `ops` and `models` only (ValueError naming an unknown operator or model)."""
    unknown = sorted(set(ops or ()) - set(OPS))
    if unknown:
        raise ValueError(f"unknown operators {unknown}; known: {', '.join(OPS)}")
    if cases is None:
        bad = sorted(set(models or ()) - set(MODEL_CASES))
        if bad:
            raise ValueError(f"unknown models {bad}; known: {', '.join(MODEL_CASES)}")
        cases = model_cases(models) if models else DEFAULT_CASES
    elif models:
        cases = [c for c in cases if c.get("model") in models]
    return [c for c in cases if ops is None or c["op"] in ops]


@contextlib.contextmanager
def _every_compile_awaited() -> Iterator[None]:
    """Within, the autotuner waits for every configuration's compile (no COMPILE_BUDGET_S): a
    table's entry weighs them all."""
    from .. import autotune_timing

    budget, autotune_timing.COMPILE_BUDGET_S = autotune_timing.COMPILE_BUDGET_S, None
    try:
        yield
    finally:
        autotune_timing.COMPILE_BUDGET_S = budget


def unwritable(out: Path) -> str | None:
    """Why the table cannot be written at `out` (None when it can), found before any case is
    tuned: a temporary file is made and removed in its folder, as the table's write does."""
    folder = out.parent
    if out.is_dir():
        return "it is a folder; --out takes the table's file name"
    if not folder.is_dir():
        return f"{folder} is not a folder" if folder.exists() else f"{folder} does not exist"
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"cannot make a file in {folder} ({exc.strerror or exc})"
    return None


def run(args: argparse.Namespace) -> int:
    from .. import autotune_tables, config
    from ..autotuning import autotune
    from ..runtime.target import cuda_status, current_target, set_target

    if args.simulator:
        set_target("sim")
    else:
        usable, why = cuda_status()
        if not usable:
            print(
                "fearless tune times kernels on the GPU, and there is no usable GPU here "
                f"({why}).\nRun it on the machine whose table you want; `--simulator` runs "
                "the tuners on the simulator to test the command only (its timings say "
                "nothing about a GPU).",
                file=sys.stderr,
            )
            return 1
    if not config.autotune_enabled():
        print("fearless tune: FEARLESS_AUTOTUNE is off, so nothing would be timed", file=sys.stderr)
        return 1
    try:
        listed = read_cases(Path(args.shapes)) if args.shapes else None
    except (OSError, ValueError) as exc:
        print(f"fearless tune: {args.shapes}: {exc}", file=sys.stderr)
        return 2
    try:
        cases = select(listed, _names(args.ops), _names(args.models))
    except ValueError as exc:
        print(f"fearless tune: {exc}", file=sys.stderr)
        return 2
    target = current_target()
    from .. import ops
    from ..autotuning import table_arch

    arch_name = table_arch()
    out = Path(args.out or f"fearless-tuning-{arch_name}.json")
    refused = unwritable(out)
    if refused is not None:
        print(
            f"fearless tune: error: cannot write the table to {out}: {refused}\n"
            "  = help: pass --out a file name in a folder you can write",
            file=sys.stderr,
        )
        return 2
    tuned = total = 0
    with autotune_tables.disabled(), _every_compile_awaited():
        for n, case in enumerate(cases, 1):
            print(f"[{n}/{len(cases)}] {describe(case)}", flush=True)
            try:
                run_case(ops, case, target.on_device)
                tuned += 1
            except Exception as exc:  # one case failing does not lose the others
                print(f"  failed: {type(exc).__name__}: {exc}".splitlines()[0], flush=True)
                continue
            try:  # after every case (merged into the file): a run cut short keeps its work
                total = autotune.export(out)
            except (OSError, ValueError) as exc:
                print(f"fearless tune: {exc}", file=sys.stderr)
                return 1
    if not tuned:
        print("fearless tune: no case ran; no table written", file=sys.stderr)
        return 1
    print(f"wrote {out}: {total} entries for {arch_name} ({tuned} of {len(cases)} cases ran)")
    return 0
