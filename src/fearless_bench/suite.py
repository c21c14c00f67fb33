"""The benchmark suite: select cases, run every family on the GPU (or dry, on the simulator),
assign ratios, write the report.

Families run in this order, each one module: elementwise, reduce, rows, transpose, gemm,
shapes, ops, launch, compile, tuning, models. `--cases` takes case or family names and shell
patterns (`gemm_f16_*`).
The exit status is 0 when no record failed (skips are fine: they say why), 1 otherwise.
"""

from __future__ import annotations

import datetime
import fnmatch
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from . import (
    env,
    family_compile,
    family_elementwise,
    family_gemm,
    family_launch,
    family_models,
    family_ops,
    family_reduce,
    family_rows,
    family_shapes,
    family_transpose,
    family_tuning,
    report,
)
from .harness import Ctx, error_text, format_line
from .model import Record, assign_ratios, failed
from .peers import REPO_ROOT, Peers
from .timing import FULL, QUICK, DeviceTimer, weigh_every_configuration

FAMILIES: tuple[ModuleType, ...] = (
    family_elementwise,
    family_reduce,
    family_rows,
    family_transpose,
    family_gemm,
    family_shapes,
    family_ops,
    family_launch,
    family_compile,
    family_tuning,
    family_models,
)


@dataclass
class Options:
    out: Path
    cases: Sequence[str] | None = None
    dry_run: bool = False
    quick: bool = False
    command: str = ""
    log: Callable[[str], None] = field(default=lambda line: print(line, flush=True))


def all_cases() -> dict[str, str]:
    """Every case name -> its family."""
    return {case: fam.FAMILY for fam in FAMILIES for case in fam.CASES}


def select(patterns: Sequence[str] | None) -> set[str]:
    """The cases named by `patterns` (case or family names, shell patterns); all when None."""
    cases = all_cases()
    if not patterns:
        return set(cases)
    chosen: set[str] = set()
    for pat in patterns:
        hit = {
            c for c, fam in cases.items() if fnmatch.fnmatch(c, pat) or fnmatch.fnmatch(fam, pat)
        }
        if not hit:
            families = sorted(set(cases.values()))
            raise ValueError(
                f"no case matches {pat!r}; cases: {', '.join(cases)}; families: {', '.join(families)}"
            )
        chosen |= hit
    return chosen


def git_commit() -> str | None:
    try:
        res = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() or None


def _meta(opts: Options, mode: str, torch: Any | None) -> dict[str, Any]:
    budget = QUICK if opts.quick else FULL
    return {
        "command": opts.command,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "mode": mode,
        "dry_run": opts.dry_run,
        "budget": budget.__dict__,
        "fearless_commit": git_commit(),
        "machine": env.machine_record(torch),
    }


def run_gpu(opts: Options, selected: set[str]) -> tuple[list[Record], dict[str, Any], Peers]:
    try:
        import torch
    except ImportError as exc:
        raise SystemExit(
            f"fearless bench: the GPU run needs torch (events, inputs): {exc}"
        ) from exc
    if not torch.cuda.is_available():
        raise SystemExit("fearless bench: torch sees no GPU; `--dry-run` runs without one")
    import fearless as fl

    fl.set_target("cuda")
    weigh_every_configuration()
    meta = _meta(opts, "quick" if opts.quick else "full", torch)
    major, minor = torch.cuda.get_device_capability()
    peers = Peers(f"sm_{major}{minor}")
    budget = QUICK if opts.quick else FULL
    ctx = Ctx(torch, DeviceTimer(torch, budget), budget, peers, opts.quick, peers.arch, opts.log)
    records: list[Record] = []
    opts.out.mkdir(parents=True, exist_ok=True)

    def checkpoint(family_records: list[Record]) -> None:
        report.write_json(
            opts.out / "partial.json", meta, peers.summary(), records + family_records
        )

    ctx.checkpoint = checkpoint
    for fam in FAMILIES:
        chosen = selected & set(fam.CASES)
        if chosen:
            opts.log(f"-- {fam.FAMILY}")
            records += run_family(opts, fam, chosen, fam.run, ctx)
            # What is measured so far survives a run that is stopped before the end.
            report.write_json(opts.out / "partial.json", meta, peers.summary(), records)
    meta["nvidia_smi_after"] = env.nvidia_smi()
    (opts.out / "partial.json").unlink(missing_ok=True)
    return records, meta, peers


def run_family(
    opts: Options,
    fam: ModuleType,
    chosen: set[str],
    body: Callable[[Any, set[str]], list[Record]],
    first: Any,
) -> list[Record]:
    """`body(first, chosen)`: a family's records. An exception its cases did not catch fails
    the family's chosen cases, not the whole run."""
    try:
        return body(first, chosen)
    except Exception as exc:
        why = f"the {fam.FAMILY} family stopped: {error_text(exc)}"
        opts.log(why)
        return [failed(case, fam.FAMILY, "suite", why) for case in sorted(chosen)]


def run_dry(opts: Options, selected: set[str]) -> tuple[list[Record], dict[str, Any], Peers]:
    import fearless as fl
    from fearless.runtime.target import default_arch

    fl.set_target("sim")
    meta = _meta(opts, "dry-run", None)
    peers = Peers(default_arch())
    records: list[Record] = []
    for fam in FAMILIES:
        chosen = selected & set(fam.CASES)
        if chosen:
            for r in run_family(opts, fam, chosen, fam.dry_run, peers):
                records.append(r)
                opts.log(format_line(r))
    return records, meta, peers


def main(opts: Options) -> int:
    t0 = time.perf_counter()
    try:
        selected = select(opts.cases)
    except ValueError as exc:
        print(f"fearless bench: {exc}", file=sys.stderr)
        return 2
    runner = run_dry if opts.dry_run else run_gpu
    records, meta, peers = runner(opts, selected)
    if not opts.dry_run:
        assign_ratios(records)
    meta["wall_s"] = time.perf_counter() - t0
    written = report.write(opts.out, meta, peers.summary(), records)
    bad = [r for r in records if r.status == "failed"]
    counts = {s: sum(r.status == s for r in records) for s in ("ok", "skipped", "failed")}
    opts.log(
        f"{counts['ok']} ok, {counts['skipped']} skipped, {counts['failed']} failed in "
        f"{meta['wall_s']:.0f} s; wrote {', '.join(str(p) for p in written)}"
    )
    return 1 if bad else 0
