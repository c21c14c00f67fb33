"""The suite's figures: heatmaps of the ratio to the best peer, readable at a glance.

- results.png: the summary, one row per family and one column per implementation; each cell is
  the geometric mean of that implementation's ratios over the family's cases (n of them), with
  how many it skipped or failed.
- results_<family>.png: one per family, one row per case; each cell is the case's ratio, and
  the right margin names the best peer with its absolute number.
- results_models_<model>.png: the models family's bars per model (models_figures.py).

Colours are centred on 1.0 on a log scale (blue: faster than every peer, red: slower), clipped
at 1/16 and 16; every cell is annotated with its number. Skipped cells are grey and hatched,
failed ones dark with FAIL, and a case an implementation does not have is left blank. Each
image is at most MAX_WIDTH_PX wide whatever the number of implementations, and grows in height
with the number of cases.

`figures` lays the figures out (no matplotlib needed); `render` draws one (matplotlib, Agg).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import models_figures
from .model import FEARLESS_IMPLS, IMPL_ORDER, Record

FAMILY_ORDER = (
    "elementwise",
    "reduce",
    "rows",
    "transpose",
    "gemm",
    "shapes",
    "launch",
    "compile",
    "tuning",
    "models",
)
DPI = 100
MAX_WIDTH_PX = 1800
CLIP = 4.0  # colours saturate at 2**-CLIP and 2**CLIP
SUMMARY_FILE = "results.png"
LEGEND = "ratio = best-peer time / time: above 1 (blue) is faster than every peer"


@dataclass
class Cell:
    """One heatmap cell: its ratio (colour) and its annotation."""

    text: str
    ratio: float | None = None
    status: str = "ok"  # "ok", "skipped", "failed" or "none" (no such implementation)


@dataclass
class Figure:
    """One image: rows x cols cells, with the file it goes to and its size in inches."""

    file: str
    title: str
    rows: list[str]
    cols: list[str]
    cells: list[list[Cell]]
    right: list[str]  # the right margin's label per row (best peer), may be empty strings
    size: tuple[float, float]

    def pixels(self) -> tuple[int, int]:
        return round(self.size[0] * DPI), round(self.size[1] * DPI)


def _order(items: Sequence[str], first: Sequence[str]) -> list[str]:
    seen = list(dict.fromkeys(items))
    return [i for i in first if i in seen] + [i for i in seen if i not in first]


def fmt_ratio(x: float) -> str:
    if x >= 9.995:
        return f"{x:.0f}"
    if x >= 0.01:
        return f"{x:.2f}"
    return f"{x:.3f}"


def _geomean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def _value(r: Record) -> str:
    if r.value is None:
        return ""
    if r.metric == "us/launch":
        return f"{r.value:.2f} µs"
    if r.metric == "s":
        return f"{r.value * 1e3:.0f} ms" if r.value < 1 else f"{r.value:.2f} s"
    return f"{r.value:.0f} {r.metric}"


def _case_cell(r: Record | None) -> Cell:
    if r is None:
        return Cell("", status="none")
    if r.status == "skipped":
        return Cell("skip", status="skipped")
    if r.status == "failed":
        return Cell("FAIL", status="failed")
    return Cell(fmt_ratio(r.ratio), r.ratio) if r.ratio is not None else Cell("ok")


def _summary_cell(recs: Sequence[Record]) -> Cell:
    if not recs:
        return Cell("", status="none")
    ratios = [r.ratio for r in recs if r.ratio is not None]
    fails = sum(r.status == "failed" for r in recs)
    gm = _geomean(ratios)
    if gm is None:
        if fails:
            return Cell(f"{fails} FAIL", status="failed")
        if all(r.status == "skipped" for r in recs):
            return Cell("skip", status="skipped")
        return Cell("ok")
    skips = sum(r.status == "skipped" for r in recs)
    text = f"{fmt_ratio(gm)}\nn={len(ratios)}" + (f", {skips} skip" if skips else "")
    text += f"\n{fails} FAIL" if fails else ""
    return Cell(text, gm)


def _size(
    rows: Sequence[str], cols: Sequence[str], right: Sequence[str], row_h: float = 0.36
) -> tuple[float, float]:
    label = 0.085 * max((len(r) for r in rows), default=4)
    margin = 0.075 * max((len(r) for r in right), default=0)
    width = 1.4 + label + 0.95 * len(cols) + margin + 1.1  # + the colour bar
    height = 1.9 + row_h * len(rows)
    return min(width, MAX_WIDTH_PX / DPI), height


def figures(records: Sequence[Record]) -> list[Figure]:
    """The summary figure, then one per family that has a ratio; [] when nothing has one."""
    if not any(r.ratio is not None for r in records):
        return []
    families = _order([r.family for r in records], FAMILY_ORDER)
    families = [f for f in families if any(r.ratio is not None for r in records if r.family == f)]
    out: list[Figure] = []
    cols = _order([r.impl for r in records if r.family in families], IMPL_ORDER)
    cells = [
        [_summary_cell([r for r in records if r.family == f and r.impl == c]) for c in cols]
        for f in families
    ]
    out.append(
        Figure(
            SUMMARY_FILE,
            "fearless bench: geometric mean of the ratio to the best peer, per family",
            families,
            cols,
            cells,
            [""] * len(families),
            _size(families, cols, [], row_h=0.6),  # up to three lines a cell
        )
    )
    for fam in families:
        recs = [r for r in records if r.family == fam]
        rows = list(dict.fromkeys(r.case for r in recs))
        fcols = _order([r.impl for r in recs], IMPL_ORDER)
        index = {(r.case, r.impl): r for r in recs}
        right = []
        for case in rows:
            best = next((r for r in recs if r.case == case and r.best_peer), None)
            b = index.get((case, best.best_peer)) if best and best.best_peer else None
            right.append(f"best: {b.impl} {_value(b)}".rstrip() if b is not None else "no peer ran")
        fcells = [[_case_cell(index.get((case, c))) for c in fcols] for case in rows]
        out.append(
            Figure(
                f"results_{fam}.png",
                f"{fam}: ratio to the best peer per case",
                rows,
                fcols,
                fcells,
                right,
                _size(rows, fcols, right),
            )
        )
    return out


def render(fig_spec: Figure, path: Path) -> list[str]:
    """Draw `fig_spec` into `path` (PNG); returns the row labels as set on the axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import Normalize
    from matplotlib.patches import Rectangle

    cmap = plt.get_cmap("RdBu")
    norm = Normalize(-CLIP, CLIP)
    nr, nc = len(fig_spec.rows), len(fig_spec.cols)
    fig, ax = plt.subplots(figsize=fig_spec.size, dpi=DPI, layout="constrained")
    for i, row in enumerate(fig_spec.cells):
        for j, cell in enumerate(row):
            face: Any = "white"  # a colour name, or cmap's RGBA tuple
            ink, hatch = "0.4", None
            if cell.ratio is not None:
                level = max(-CLIP, min(CLIP, math.log2(cell.ratio)))
                face = cmap(norm(level))
                ink = "white" if abs(level) > 0.6 * CLIP else "black"
            elif cell.status == "skipped":
                face, ink, hatch = "0.88", "0.35", "///"
            elif cell.status == "failed":
                face, ink = "0.15", "white"
            ax.add_patch(
                Rectangle(
                    (j - 0.5, i - 0.5),
                    1,
                    1,
                    facecolor=face,
                    edgecolor="white",
                    hatch=hatch,
                    linewidth=1.5,
                )
            )
            weight = "bold" if cell.status == "failed" else "normal"
            ax.text(
                j, i, cell.text, ha="center", va="center", color=ink, fontsize=10, fontweight=weight
            )
    ax.set_xlim(-0.5, nc - 0.5)
    ax.set_ylim(nr - 0.5, -0.5)
    ax.set_xticks(range(nc))
    ax.set_xticklabels(fig_spec.cols, rotation=30, ha="left", fontsize=10)
    ax.xaxis.tick_top()
    ax.set_yticks(range(nr))
    ax.set_yticklabels(fig_spec.rows, fontsize=10)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    n_ours = sum(c in FEARLESS_IMPLS for c in fig_spec.cols)
    if 0 < n_ours < nc:  # fearless's own columns | the peers
        ax.axvline(n_ours - 0.5, color="black", linewidth=2)
    if any(fig_spec.right):
        twin = ax.twinx()
        twin.set_ylim(ax.get_ylim())
        twin.set_yticks(range(nr))
        twin.set_yticklabels(fig_spec.right, fontsize=9, color="0.3")
        twin.tick_params(length=0)
        for side in twin.spines.values():
            side.set_visible(False)
    sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    bar = fig.colorbar(
        sm, ax=ax, shrink=min(1.0, 6.0 / max(nr, 1)) if nr > 6 else 0.9, pad=0.02, aspect=15
    )
    ticks = list(range(-int(CLIP), int(CLIP) + 1, 2))
    bar.set_ticks(ticks)
    bar.set_ticklabels([f"1/{2**-t}" if t < 0 else str(2**t) for t in ticks])
    bar.set_label("ratio (log scale)", fontsize=9)
    ax.set_title(f"{fig_spec.title}\n{LEGEND}", fontsize=12, loc="left", pad=12)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return labels


def write_all(out: Path, records: Sequence[Record]) -> tuple[list[Path], str | None]:
    """Render every figure into `out`; (paths written, None) or ([], why none was written)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return [], "results.png not written: matplotlib is not installed"
    specs = figures(records)
    if not specs:
        return [], "results.png not written: no case has a ratio (no peer ran)"
    for stale in out.glob("results_*.png"):  # a family an earlier run into `out` had
        stale.unlink()
    paths = []
    for spec in specs:
        render(spec, out / spec.file)
        paths.append(out / spec.file)
    return paths + models_figures.write(out, records), None
