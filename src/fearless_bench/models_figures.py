"""The models family's comparison plot, one image per model (results_models_<model>.png): per
workload, grouped bars per implementation of the speed-up over torch eager (tokens/s over
torch's) and of the peak memory in GiB; a skipped or failed implementation is a labelled gap.

`plots` lays them out from the records (no matplotlib); `render` draws one (matplotlib, Agg);
figures.write_all calls `write` after the heatmaps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .model import IMPL_ORDER, TORCH, Record

FAMILY = "models"
DPI = 100
MAX_WIDTH_PX = 1800  # as figures.py's


@dataclass
class ModelPlot:
    """One model's bars: `speed[i][w]` is implementation i's tokens/s over torch eager's at
    workload w (None: no bar, `gaps[i][w]` says why), `memory[i][w]` its peak GiB."""

    file: str
    title: str
    workloads: list[str]
    impls: list[str]
    speed: list[list[float | None]]
    memory: list[list[float | None]]
    gaps: list[list[str]]


def _gap(r: Record | None) -> str:
    if r is None:
        return ""
    return {"skipped": "skip", "failed": "FAIL"}.get(r.status, "")


def _tokens_per_s(r: Record | None) -> float | None:
    return r.value if r is not None and r.status == "ok" and r.value else None


def plots(records: Sequence[Record]) -> list[ModelPlot]:
    """One plot per model of the models family that has an ok record, in the records' order."""
    recs = [r for r in records if r.family == FAMILY]
    tags = list(dict.fromkeys(str(r.params.get("tag", "")) for r in recs if r.status == "ok"))
    out = []
    for tag in tags:
        mine = [r for r in recs if r.params.get("tag") == tag]
        title = str(mine[0].params.get("model", tag))
        workloads = list(dict.fromkeys(str(r.params.get("workload_name", r.case)) for r in mine))
        seen = {r.impl for r in mine}
        impls = [i for i in IMPL_ORDER if i in seen] + sorted(seen - set(IMPL_ORDER))
        index = {(str(r.params.get("workload_name", r.case)), r.impl): r for r in mine}
        speed: list[list[float | None]] = []
        memory: list[list[float | None]] = []
        gaps: list[list[str]] = []
        for impl in impls:
            s_row: list[float | None] = []
            m_row: list[float | None] = []
            g_row: list[str] = []
            for w in workloads:
                r, base = index.get((w, impl)), index.get((w, TORCH))
                value, ref = _tokens_per_s(r), _tokens_per_s(base)
                s_row.append(value / ref if value and ref else None)
                peak = r.peak_bytes if r is not None and value else None
                m_row.append(peak / 2**30 if peak else None)
                g_row.append(_gap(r) if not value else ("" if ref else "no torch"))
            speed.append(s_row)
            memory.append(m_row)
            gaps.append(g_row)
        out.append(
            ModelPlot(f"results_models_{tag}.png", title, workloads, impls, speed, memory, gaps)
        )
    return out


def render(plot: ModelPlot, path: Path) -> None:
    """Draw `plot` into `path` (PNG): speed-up over torch eager above, peak memory below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_w, n_i = len(plot.workloads), len(plot.impls)
    width = 0.8 / max(n_i, 1)
    size = (min(MAX_WIDTH_PX / DPI, max(8.0, 1.8 * n_w + 3.0)), 8.0)
    fig, axes = plt.subplots(2, 1, figsize=size, dpi=DPI, layout="constrained", sharex=True)
    colours = plt.get_cmap("tab10")
    for ax, values, label in (
        (axes[0], plot.speed, "tokens/s over torch eager's"),
        (axes[1], plot.memory, "peak memory (GiB)"),
    ):
        for i, impl in enumerate(plot.impls):
            xs = [w + (i - (n_i - 1) / 2) * width for w in range(n_w)]
            heights = [v if v is not None else 0.0 for v in values[i]]
            ax.bar(xs, heights, width, label=impl, color=colours(i % 10))
            for x, v, gap in zip(xs, values[i], plot.gaps[i], strict=True):
                if v is None and gap:
                    ax.text(x, 0, gap, rotation=90, ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(n_w))
        ax.set_xticklabels(plot.workloads, rotation=20, ha="right", fontsize=9)
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    axes[0].axhline(1.0, color="black", linewidth=1)
    axes[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"{plot.title}: speed-up over torch eager and peak memory per workload")
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def write(out: Path, records: Sequence[Record]) -> list[Path]:
    """Render every model's plot into `out` (matplotlib is there: figures.write_all checked)."""
    paths = []
    for plot in plots(records):
        render(plot, out / plot.file)
        paths.append(out / plot.file)
    return paths
