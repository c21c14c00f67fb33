"""The suite's figures (fearless_bench/figures.py): a summary heatmap plus one heatmap per family.

Built from synthetic records of a GPU run: several families (shapes with 44 cases, as the real
suite has), nine implementations, ok, skipped and failed records. The layout is checked without
matplotlib; the images themselves where matplotlib is installed (pixel sizes, every case).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fearless_bench import figures, model, report
from fearless_bench.model import Record

PEERS = (model.CUDA_CPP, model.TRITON, model.CUTILE, model.TILEGYM, model.TORCH)
LAUNCH_PEERS = (model.TRITON, model.TORCH, model.RAW_LAUNCH, model.CUDA_CORE)


def gpu_run() -> list[Record]:
    """Records as a GPU run writes them, ratios assigned."""
    out: list[Record] = []

    def add(case: str, family: str, impls: tuple[str, ...], metric: model.Metric) -> None:
        for k, impl in enumerate(impls):
            t = 1.0 + 0.37 * ((k * 7 + len(case)) % 5)
            out.append(Record(case, family, impl, "ok", time=t, metric=metric, value=100 / t))

    ours = (model.FEARLESS_SIMT, model.FEARLESS_TILE)  # the tracks (fearless+compile: models)
    for case in ("vecadd", "saxpy"):
        add(case, "elementwise", (*ours, *PEERS[:4]), "GB/s")
    for n in range(44):
        add(f"shapes_layer_norm_bf16_{1024 * (n + 1)}x{n + 3}", "shapes", (*ours, *PEERS), "GB/s")
    for case in ("gemm_f16_1024", "gemm_f16_8192"):
        add(case, "gemm", (model.FEARLESS_TILE, *PEERS), "TFLOP/s")
    out.append(model.skipped("gemm_f16_8192", "gemm", model.FEARLESS_SIMT, "too slow"))
    out.append(model.failed("gemm_f16_1024", "gemm", model.FEARLESS_SIMT, "rel_err 0.5"))
    for case in ("launch_0arrays", "launch_8arrays"):
        add(case, "launch", (model.FEARLESS_SIMT, *LAUNCH_PEERS), "us/launch")
        out.append(model.skipped(case, "launch", model.FEARLESS_TILE, "needs a Part"))
    out.append(model.skipped("copy", "elementwise", model.FEARLESS_TILE, "not written"))
    add("compile_first_call", "compile", (model.FEARLESS_SIMT, model.TRITON), "s")
    out.append(model.failed("compile_first_call", "compile", model.FEARLESS_TILE, "no tileiras"))
    model.assign_ratios(out)
    return out


def cases_of(records: list[Record], family: str) -> list[str]:
    return list(dict.fromkeys(r.case for r in records if r.family == family))


def test_layout_summary_and_one_figure_per_family() -> None:
    records = gpu_run()
    specs = figures.figures(records)
    families = ["elementwise", "gemm", "shapes", "launch", "compile"]
    ordered = [f for f in figures.FAMILY_ORDER if f in families]
    assert [s.file for s in specs] == ["results.png"] + [f"results_{f}.png" for f in ordered]
    summary, by_file = specs[0], {s.file: s for s in specs[1:]}
    assert summary.rows == ordered
    tracks = [model.FEARLESS_SIMT, model.FEARLESS_TILE]
    assert summary.cols[:2] == tracks  # fearless first, then the peers
    for fam in ordered:
        spec = by_file[f"results_{fam}.png"]
        assert spec.rows == cases_of(records, fam)  # every case, in run order
        assert len(spec.cells) == len(spec.rows) == len(spec.right)
        assert all(len(row) == len(spec.cols) for row in spec.cells)
    for spec in specs:
        width, height = spec.pixels()
        assert 600 <= width <= figures.MAX_WIDTH_PX and 150 <= height <= 2000, spec.file
    # Every cell says what it is: the ratio, skip, FAIL, or blank for a case not written.
    gemm = by_file["results_gemm.png"]
    simt = gemm.cols.index(model.FEARLESS_SIMT)
    assert [row[simt].status for row in gemm.cells] == ["failed", "skipped"]
    assert [row[simt].text for row in gemm.cells] == ["FAIL", "skip"]
    best = next(r for r in records if r.case == "gemm_f16_1024" and r.impl == model.TORCH)
    torch_cell = gemm.cells[0][gemm.cols.index(model.TORCH)]
    assert torch_cell.ratio == best.ratio and torch_cell.text == figures.fmt_ratio(best.ratio or 0)
    assert gemm.right[0].startswith(f"best: {best.best_peer} ")
    erow = summary.rows.index("elementwise")
    assert summary.cells[erow][summary.cols.index(model.TORCH)].status == "none"
    assert summary.cells[erow][summary.cols.index(model.FEARLESS_TILE)].text.endswith("n=2, 1 skip")
    assert by_file["results_elementwise.png"].right[-1] == "no peer ran"  # copy: only a skip
    assert model.TORCH not in by_file["results_elementwise.png"].cols
    # The summary: geometric mean over the family's cases, with n, and the failures counted.
    srow = summary.rows.index("gemm")
    cell = summary.cells[srow][summary.cols.index(model.FEARLESS_TILE)]
    ratios = [r.ratio for r in records if r.family == "gemm" and r.impl == model.FEARLESS_TILE]
    assert cell.ratio == pytest.approx(report.geomean([x for x in ratios if x is not None]))
    assert cell.text.endswith("n=2")
    assert summary.cells[srow][summary.cols.index(model.FEARLESS_SIMT)].text == "1 FAIL"
    lrow = summary.rows.index("launch")
    assert summary.cells[lrow][summary.cols.index(model.FEARLESS_TILE)].text == "skip"


def test_ratio_labels() -> None:
    assert [figures.fmt_ratio(x) for x in (0.0021, 0.5, 1.0, 12.4)] == [
        "0.002",
        "0.50",
        "1.00",
        "12",
    ]
    assert figures.figures([Record("a", "elementwise", model.FEARLESS_SIMT, "ok", time=1.0)]) == []


def test_images_from_a_gpu_run(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    records = gpu_run()
    (tmp_path / "results_rows.png").write_bytes(b"from an earlier run")
    meta = {"command": "fearless bench", "mode": "full", "wall_s": 1.0, "machine": {}}
    written = report.write(tmp_path, meta, {}, records)
    specs = figures.figures(records)
    pngs = [p for p in written if p.suffix == ".png"]
    assert [p.name for p in pngs] == [s.file for s in specs]
    assert not (tmp_path / "results_rows.png").exists()  # a stale family image is removed
    md = (tmp_path / "results.md").read_text()
    for spec in specs:
        path = tmp_path / spec.file
        height, width = imread(path).shape[:2]
        assert abs(width - spec.pixels()[0]) <= 1 and abs(height - spec.pixels()[1]) <= 1
        assert width <= figures.MAX_WIDTH_PX
        assert f"]({spec.file})" in md
    # The row labels as set on the axes of the largest image: all 44 shapes cases.
    shapes = next(s for s in specs if s.file == "results_shapes.png")
    assert figures.render(shapes, tmp_path / "again.png") == cases_of(records, "shapes")
    shown = {c for s in specs[1:] for c in s.rows}
    assert shown == {r.case for r in records}  # every case appears in its family's image
