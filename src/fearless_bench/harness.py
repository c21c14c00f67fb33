"""Running one device case: build each implementation, check it, time it, make its record.

A family module describes a case (`DeviceCase`: name, sizes, bytes or flops, dtype, the float64
reference) and its implementations (name -> builder, named and ordered by `device_impls`). For
each implementation, in one process and on the same inputs: the builder compiles and allocates
(`Skip` = not on this machine); its output is poisoned with NaN, it runs once and is checked
against the reference (`check.py`); only then is it timed (`timing.DeviceTimer`). Any exception
becomes a failed record with its message, so one broken peer never stops the suite.

A probe run in a fresh process (fresh_process.py) reports the same way, as one JSON line
(`print_probe_result`).
"""

from __future__ import annotations

import contextlib
import json
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import check, model
from .model import Record, Skip, failed, skipped
from .peers import Peers
from .timing import Budget, DeviceTimer


@dataclass
class Prepared:
    """One implementation ready to run: `run()` launches it once.

    `out` is the tensor it writes in place (poisoned with NaN before the check); when None,
    the value `run()` returns is checked instead (functional APIs such as `torch.softmax`).
    """

    run: Callable[[], Any]
    out: Any | None = None
    note: str | None = None


Builder = Callable[[], Prepared]
Impls = Sequence[tuple[str, Builder]]


def device_impls(
    simt: Builder,
    tile: Builder,
    cuda_cpp: Builder,
    triton: Builder,
    cutile: Builder,
    torch: Builder,
    /,
    tilegym: Builder | None = None,
) -> Impls:
    """A device case's builders under their implementation names, in the suite's column order
    (`model.IMPL_ORDER`); TileGym only for the cases it has a kernel for."""
    named = [
        (model.FEARLESS_SIMT, simt),
        (model.FEARLESS_TILE, tile),
        (model.CUDA_CPP, cuda_cpp),
        (model.TRITON, triton),
        (model.CUTILE, cutile),
        (model.TILEGYM, tilegym),
        (model.TORCH, torch),
    ]
    return [(name, build) for name, build in named if build is not None]


@dataclass
class DeviceCase:
    name: str
    family: str
    dtype: str  # "f32" | "f16" | "bf16": picks the error threshold
    reference: Callable[[], Any]  # float64 torch tensor (computed once, on first use)
    bytes: int | None = None  # fewest bytes moved through memory: gives GB/s
    flops: int | None = None  # gives TFLOP/s
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Ctx:
    """What every family needs to run on the GPU."""

    torch: Any
    timer: DeviceTimer
    budget: Budget
    peers: Peers
    quick: bool
    arch: str
    log: Callable[[str], None]
    # Keeps a family's records so far (partial.json), so that a run stopped in the middle of a
    # long family keeps what it measured; the suite sets it.
    checkpoint: Callable[[list[Any]], None] = lambda records: None

    def sync(self) -> None:
        """Wait for the device, raising any pending fearless device error."""
        self.torch.cuda.synchronize()
        from fearless.runtime.device_errors import synchronize

        synchronize()


def error_text(exc: BaseException) -> str:
    """An exception as one readable line (fearless diagnostics keep their first line)."""
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    head = lines[0] if lines else ""
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    at = f" (at {where[0].filename.rsplit('/', 1)[-1]}:{where[0].lineno})" if where else ""
    return f"{type(exc).__name__}: {head}{at}"[:500]


def missing_tool(exc: BaseException) -> str | None:
    """The reason, when `exc` says a compiler fearless drives is not on this machine."""
    from fearless.errors import ToolchainError

    if isinstance(exc, ToolchainError) and "was not found" in str(exc):
        first = str(exc).strip().splitlines()[0]
        return f"{first} (bench/README.md: carry .tiletools or a precompiled cache)"
    return None


def skip_reason(exc: BaseException) -> str | None:
    """Why `exc` means "not on this machine" rather than a failure: a `Skip`'s message, or a
    compiler that is not found (`missing_tool`); None for any other exception."""
    if isinstance(exc, Skip):
        return str(exc)
    return missing_tool(exc)


def print_probe_result(measure: Callable[[], dict[str, Any]]) -> int:
    """A probe's whole output, the one JSON line `fresh_process.probe` reads: what `measure()`
    returns, else {"skip": reason} (`skip_reason`) or {"error": one line} (`error_text`).
    Returns the probe's exit status, 0: an error is a result, reported on that line."""
    out: dict[str, Any]
    try:
        out = measure()
    except Exception as exc:
        why = skip_reason(exc)
        out = {"skip": why} if why is not None else {"error": error_text(exc)}
    with contextlib.suppress(BrokenPipeError):
        print(json.dumps(out))
    return 0


def not_ok(case: str, family: str, impl: str, exc: Exception, **params: Any) -> Record:
    """The record of an implementation that raised `exc`: skipped where `skip_reason` gives a
    reason, else failed with the exception as one line (`error_text`)."""
    why = skip_reason(exc)
    if why is not None:
        return skipped(case, family, impl, why, **params)
    return failed(case, family, impl, error_text(exc), **params)


def run_device_case(ctx: Ctx, case: DeviceCase, impls: Impls) -> list[Record]:
    records: list[Record] = []
    reference: Any = None
    for name, build in impls:
        prep: Prepared | None = None
        try:
            prep = build()
            if reference is None:
                reference = case.reference()
            records.append(measure(ctx, case, name, prep, reference))
        except Exception as exc:
            records.append(not_ok(case.name, case.family, name, exc, **case.params))
        ctx.log(format_line(records[-1]))
        del prep
    del reference
    ctx.torch.cuda.empty_cache()
    return records


def measure(ctx: Ctx, case: DeviceCase, name: str, prep: Prepared, reference: Any) -> Record:
    if prep.out is not None:
        prep.out.fill_(float("nan"))
    result = prep.run()
    ctx.sync()
    out = prep.out if prep.out is not None else result
    unwritten = check.count_nan_torch(out)
    err = check.rel_err_torch(out, reference)
    why = check.verdict(err, case.dtype, unwritten)
    rec = Record(case.name, case.family, name, "ok", params=dict(case.params), rel_err=err)
    rec.note = prep.note
    if why is not None:
        rec.status, rec.reason = "failed", f"wrong result: {why}"
        return rec
    timing = ctx.timer.time(prep.run)
    ctx.sync()
    rec.time, rec.spread, rec.reps = timing.median, (timing.p20, timing.p80), timing.reps
    seconds = timing.median * 1e-3
    if case.bytes is not None:
        rec.metric, rec.value = "GB/s", case.bytes / seconds / 1e9
    elif case.flops is not None:
        rec.metric, rec.value = "TFLOP/s", case.flops / seconds / 1e12
    return rec


def format_line(r: Record) -> str:
    """One progress line per record (the H200 run's output tail)."""
    head = f"{r.case:<18} {r.impl:<19}"
    if r.status == "ok" and r.time is not None:
        value = f"{r.value:9.1f} {r.metric}" if r.value is not None and r.metric else ""
        if r.time_unit == "ms":
            return f"{head} {r.time:10.4f} ms {value}"
        return f"{head} {r.time:10.3f} {r.time_unit}"
    return f"{head} {r.status}: {r.reason}"
