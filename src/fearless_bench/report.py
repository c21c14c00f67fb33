"""Writing a run's results: DIR/results.json, DIR/results.md and DIR/results.png.

- results.json: the machine record, which peers were found (or why not), and one record per
  case and implementation (model.Record), skipped and failed ones included.
- results.md: the ratio to the best peer per case and implementation, the geometric mean of
  each implementation's ratios, the absolute numbers, the peak memory where records have one
  (the models family), and every skip and failure with its reason.
- results.png and results_<family>.png: heatmaps of the ratios, a summary per family and one
  image per family with every case (figures.py; matplotlib: when it is missing the Markdown
  says so and the rest is written). results.md shows them under "Figures".
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import figures
from .model import FEARLESS_IMPLS, IMPL_ORDER, Record


def impl_columns(records: Sequence[Record]) -> list[str]:
    seen = {r.impl for r in records}
    return [i for i in IMPL_ORDER if i in seen] + sorted(seen - set(IMPL_ORDER))


def case_rows(records: Sequence[Record]) -> list[str]:
    out: list[str] = []
    for r in records:
        if r.case not in out:
            out.append(r.case)
    return out


def geomean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


# Geometric means are taken per group: kernel time, launch overhead, compile time and time to
# a first tuned result are different quantities, and one mean over all would let one stand in
# for another.
GROUPS = (
    ("kernels", lambda family: family not in ("launch", "compile", "tuning", "models")),
    ("launch", lambda family: family == "launch"),
    ("compile", lambda family: family == "compile"),
    ("tuning", lambda family: family == "tuning"),
    ("models", lambda family: family == "models"),
)


def geomeans(records: Sequence[Record]) -> dict[str, tuple[float | None, int]]:
    """Per implementation: the geometric mean of its ratios, and over how many cases."""
    out: dict[str, tuple[float | None, int]] = {}
    for impl in impl_columns(records):
        ratios = [r.ratio for r in records if r.impl == impl and r.ratio is not None]
        out[impl] = (geomean([x for x in ratios if x is not None]), len(ratios))
    return out


def group_geomeans(
    records: Sequence[Record],
) -> list[tuple[str, dict[str, tuple[float | None, int]]]]:
    """(group, geomeans) for each group that has at least one ratio."""
    out = []
    for name, member in GROUPS:
        chosen = [r for r in records if member(r.family)]
        if any(r.ratio is not None for r in chosen):
            out.append((name, geomeans(chosen)))
    return out


def write_json(
    path: Path, meta: dict[str, Any], peers: dict[str, str], records: Sequence[Record]
) -> None:
    doc = {"meta": meta, "peers": peers, "records": [r.to_json() for r in records]}
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")


def _cell(r: Record | None, dry: bool) -> str:
    if r is None:
        return "—"
    if r.status == "skipped":
        return "skip"
    if r.status == "failed":
        return "**FAIL**"
    if dry:
        return f"ok ({r.rel_err:.1e})" if r.rel_err is not None else "ok"
    return f"{r.ratio:.3f}" if r.ratio is not None else "ok"


def _value(r: Record | None) -> str:
    if r is None:
        return "—"
    if r.status != "ok" or r.value is None:
        return r.status
    if r.metric == "us/launch":
        return f"{r.value:.2f} µs"
    if r.metric == "s":
        return f"{r.value * 1e3:.1f} ms" if r.value < 1 else f"{r.value:.2f} s"
    if r.peak_bytes is not None:
        return f"{r.value:.1f} {r.metric}, {gib(r.peak_bytes)}"
    return f"{r.value:.1f} {r.metric}"


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def memory_ratios(records: Sequence[Record]) -> dict[tuple[str, str], float]:
    """(case, impl) -> the least peak memory among the case's peers over this record's peak
    (above 1: less memory than every peer), for the ok records that have a peak."""
    out: dict[tuple[str, str], float] = {}
    for case in case_rows(records):
        have = [r for r in records if r.case == case and r.status == "ok" and r.peak_bytes]
        peers = [r.peak_bytes for r in have if r.impl not in FEARLESS_IMPLS and r.peak_bytes]
        if peers:
            for r in have:
                out[(case, r.impl)] = min(peers) / (r.peak_bytes or 1)
    return out


def memory_lines(records: Sequence[Record]) -> list[str]:
    """The "Peak memory" section: per case and implementation the peak device memory and, in
    brackets, the least peer peak over it; [] when no record has a peak."""
    withpeak = [r for r in records if r.peak_bytes is not None]
    if not withpeak:
        return []
    cols = impl_columns(withpeak)
    ratios = memory_ratios(withpeak)
    index = {(r.case, r.impl): r for r in records}
    lines = ["", "## Peak memory", ""]
    lines += ["Peak device memory over the timed steps (torch.cuda.max_memory_allocated); in",
              "brackets the least peer peak / this peak (above 1: less memory than every peer).",
              ""]  # fmt: skip
    lines.append("| case | " + " | ".join(cols) + " |")
    lines.append("|---" * (len(cols) + 1) + "|")
    for case in case_rows(withpeak):
        cells: list[str] = []
        for c in cols:
            r = index.get((case, c))
            if r is None or r.peak_bytes is None:
                cells.append("—" if r is None else r.status)
            else:
                ratio = ratios.get((case, c))
                cells.append(gib(r.peak_bytes) + (f" ({ratio:.2f})" if ratio else ""))
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return lines


def markdown(
    meta: dict[str, Any],
    peers: dict[str, str],
    records: Sequence[Record],
    plot_note: str | None,
    pngs: Sequence[str] = (),
) -> str:
    dry = bool(meta.get("dry_run"))
    cols = impl_columns(records)
    rows = case_rows(records)
    index = {(r.case, r.impl): r for r in records}
    gpu = meta.get("machine", {}).get("gpu", {})
    smi = meta.get("machine", {}).get("nvidia_smi", {})
    lines = [f"# fearless benchmark results{' (dry run: simulator, no GPU)' if dry else ''}", ""]
    lines += [f"- command: `{meta.get('command', '')}`", f"- started: {meta.get('started', '')}"]
    lines += [f"- wall time: {meta.get('wall_s', 0):.0f} s, mode: {meta.get('mode', '')}"]
    if gpu.get("name"):
        lines.append(
            f"- GPU: {gpu.get('name', '?')} (cc {gpu.get('compute_capability', '?')}, "
            f"{gpu.get('sm_count', '?')} SMs), driver CUDA {gpu.get('driver_cuda_version', '?')}"
        )
    if isinstance(smi, dict) and smi:
        lines.append(
            f"- nvidia-smi: driver {smi.get('driver_version')}, SM clock {smi.get('clocks.sm')} "
            f"(max {smi.get('clocks.max.sm')}), memory clock {smi.get('clocks.mem')}, "
            f"{smi.get('temperature.gpu')} C, power {smi.get('power.draw')}"
        )
    pk = meta.get("machine", {}).get("packages", {})
    if pk:
        lines.append("- packages: " + ", ".join(f"{k} {v}" for k, v in pk.items() if v))
    lines.append("")
    if dry:
        lines += ["Each fearless case compiled and checked on the simulator at tiny sizes;",
                  "cells give the relative error against NumPy float64.", ""]  # fmt: skip
    else:
        lines += ["Ratio = time of the best peer / time of the implementation (above 1: faster",
                  "than every peer). Peers are every implementation but fearless's own.",
                  "`skip`: not available on this machine (reason below); `—`: not written for",
                  "this case.", ""]  # fmt: skip
    extra = [] if dry else ["best peer"]
    lines.append("| case | " + " | ".join([*cols, *extra]) + " |")
    lines.append("|---" * (len(cols) + 1 + len(extra)) + "|")
    for case in rows:
        cells = [_cell(index.get((case, c)), dry) for c in cols]
        if not dry:
            best = next((r for r in records if r.case == case and r.best_peer), None)
            b = index.get((case, best.best_peer)) if best and best.best_peer else None
            cells.append(f"{b.impl} ({_value(b)})" if b is not None else "")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    if not dry:
        for group, gm in group_geomeans(records):
            cells = [
                f"**{gm[c][0]:.3f}** (n={gm[c][1]})" if gm.get(c, (None, 0))[0] is not None else "—"
                for c in cols
            ]
            lines.append(f"| **geomean, {group}** | " + " | ".join(cells) + " | |")
        lines += ["", "## Absolute numbers", ""]
        lines.append("| case | " + " | ".join(cols) + " |")
        lines.append("|---" * (len(cols) + 1) + "|")
        for case in rows:
            lines.append(
                f"| {case} | " + " | ".join(_value(index.get((case, c))) for c in cols) + " |"
            )
    if not dry:
        lines += memory_lines(records)
    lines += ["", "## Skipped and failed", ""]
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for r in records:
        if r.status != "ok":
            grouped.setdefault((r.status, r.impl, r.reason or ""), []).append(r.case)
    if not grouped:
        lines.append("None.")
    for (status, impl, reason), cases in sorted(grouped.items()):
        lines.append(f"- {status} **{impl}** ({', '.join(cases)}): {reason}")
    notes: dict[tuple[str, str], list[str]] = {}
    for r in records:
        if r.note:
            notes.setdefault((r.impl, r.note), []).append(r.case)
    if notes:
        lines += ["", "## Notes on implementations", ""]
        for (impl, note), cases in sorted(notes.items()):
            lines.append(f"- **{impl}** ({', '.join(cases)}): {note}")
    lines += ["", "## Peers on this machine", ""]
    lines += [f"- {name}: {state}" for name, state in peers.items()] or ["- none probed"]
    if plot_note:
        lines += ["", plot_note]
    if pngs:
        lines += ["", "## Figures", ""]
        lines += [f"![{name.removesuffix('.png')}]({name})" for name in pngs]
    return "\n".join(lines) + "\n"


def write(
    out: Path, meta: dict[str, Any], peers: dict[str, str], records: Sequence[Record]
) -> list[Path]:
    """Write the JSON, the Markdown and the figures (where they can be); returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "results.json"]
    write_json(written[0], meta, peers, records)
    note, pngs = None, list[Path]()
    if not meta.get("dry_run"):
        pngs, note = figures.write_all(out, records)
        written += pngs
    (out / "results.md").write_text(markdown(meta, peers, records, note, [p.name for p in pngs]))
    written.insert(1, out / "results.md")
    return written
