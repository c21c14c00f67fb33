"""`fearless bench`: the dry run end to end, case selection, ratios, the report, skip reasons.

The GPU run itself needs a GPU (`fearless bench` on the device); what can fail without one is
tested here: every fearless case compiles and matches NumPy on the simulator (the dry run CI
runs), a missing peer becomes a skipped record with its reason, and the report's arithmetic.
"""

from __future__ import annotations

import io
import json
import math
import types
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import fearless as fl
from fearless import tile
from fearless.backends import toolchain
from fearless.cli.main import main
from fearless_bench import family_ops, family_shapes, model, report, suite, tile_track, timing
from fearless_bench.harness import Ctx, DeviceCase, Prepared, run_device_case
from fearless_bench.model import Record, Skip

TILE_CASES = (
    "vecadd",
    "saxpy",
    "sum",
    "softmax",
    "rms_norm",
    "layer_norm",
    "transpose",
    "gemm_f16",
    "gemm_bf16",
    "launch_1arrays",
    "launch_3arrays",
    "launch_8arrays",
)


@pytest.fixture(autouse=True)
def _restore_target() -> Iterator[None]:
    yield
    fl.set_target(None)  # the suite sets its target for the process


# The dry run in parts (`fearless bench --dry-run --cases ...`), so that pytest's workers share
# it: the whole of it was the suite's longest test (85 s of a `make test` on 2 CPUs).
DRY_PARTS = {
    "kernels": ("elementwise", "reduce", "rows", "transpose", "gemm", "launch", "compile"),
    "shapes": ("shapes",),
    "ops-a": ("ops_a*",),
    "ops-b-f": ("ops_[b-f]*",),
    "ops-g-l": ("ops_[g-l]*",),
    "ops-m-z": ("ops_[m-z]*",),
}
DRY_LEFT_OUT = ("models_", "tuning_")  # the GPU only (test_bench_models.py, test_bench_tuning.py)


def test_the_dry_run_parts_cover_every_case_once() -> None:
    parts = [suite.select(list(patterns)) for patterns in DRY_PARTS.values()]
    assert sum(len(p) for p in parts) == len(set().union(*parts))  # no case twice
    every = {c for c in suite.all_cases() if not c.startswith(DRY_LEFT_OUT)}
    assert set().union(*parts) == every


@pytest.mark.parametrize("part", DRY_PARTS)
def test_dry_run_compiles_and_checks_every_fearless_case(part: str, tmp_path: Path) -> None:
    out = tmp_path / "dry"
    assert main(["bench", "--dry-run", "--cases", *DRY_PARTS[part], "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["meta"]["dry_run"] is True
    records = doc["records"]
    cases = suite.select(list(DRY_PARTS[part]))
    simt = {r["case"]: r for r in records if r["impl"] == model.FEARLESS_SIMT}
    # Every case has its SIMT kernel compiled and checked (GEMM once per dtype).
    # ops: fearless.ops' Tile kernels only
    skip = ("gemm_", "compile_", "shapes_", "ops_")
    want = {c for c in cases if not c.startswith(skip)}
    gemms = {"gemm_f16", "gemm_bf16"} if part == "kernels" else set()
    assert want | gemms == set(simt)
    for r in simt.values():
        assert r["status"] == "ok", r
        assert r["rel_err"] is not None and r["rel_err"] < 2e-3 * (5 if "bf16" in r["case"] else 1)
    tile = {r["case"]: r for r in records if r["impl"] == model.FEARLESS_TILE}
    for r in tile.values():
        assert r["status"] in ("ok", "skipped"), r
        assert r["status"] == "ok" or r["reason"], r
    if part == "kernels":
        if toolchain.find_tileiras() is not None:
            assert all(tile[c]["status"] == "ok" for c in TILE_CASES), tile
        # The one Tile cell left out, and why: a Tile launch needs a Part.
        assert set(tile) == {*TILE_CASES, "launch_0arrays"}
        assert tile["launch_0arrays"]["status"] == "skipped"
        assert "needs a Part" in tile["launch_0arrays"]["reason"]
        md = (out / "results.md").read_text()
        assert "dry run" in md and "| vecadd | ok (" in md
        assert not (out / "results.png").exists()  # no ratios without a GPU run
    elif part == "shapes":  # each op and dtype once, through its autotuned function
        shapes = {f"shapes_{op}_{dt}" for op, dts in family_shapes.ROW_OPS.items() for dt in dts}
        shapes |= {"shapes_gemm_f16", "shapes_gemm_bf16"}
        assert set(tile) == shapes and all(r["status"] == "ok" for r in tile.values()), tile
    else:  # each op, variant and dtype once: a group per spec, covering its cases
        ops = {s.group for s in family_ops.specs() if s.name in cases}
        assert set(tile) == ops and all(r["status"] == "ok" for r in tile.values()), tile
        assert all(r["rel_err"] is not None for r in tile.values()), tile
        covered = [c for r in records if r["case"] in ops for c in r["params"]["covers"]]
        assert sorted(covered) == sorted(c for c in family_ops.CASES if c in cases)


def test_dry_run_of_selected_cases_only(tmp_path: Path) -> None:
    assert main(["bench", "--dry-run", "--cases", "sum", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    assert {r["case"] for r in doc["records"]} == {"sum"}
    assert {r["impl"] for r in doc["records"]} == {model.FEARLESS_SIMT, model.FEARLESS_TILE}
    if toolchain.find_tileiras() is not None:
        assert all(r["status"] == "ok" for r in doc["records"]), doc["records"]


def test_tile_cases_of_the_new_examples() -> None:
    """The suite's Tile cases name kernels the examples have, with the peers' tile shapes."""
    from fearless_bench.peers import load_example

    examples = load_example("tile_kernels")
    first, final = tile_track.sum_cases()
    for case in (
        tile_track.saxpy_case(),
        tile_track.transpose_case(),
        first,
        final,
        *(tile_track.launch_case(k) for k in (1, 3, 8)),
    ):
        kernel, _ = tile_track.resolve(examples, case)
        assert kernel.name == case.kernel
    assert tile_track.transpose_case().tile == (64, 64)
    assert first.consts == {"TILE": 4096} and final.consts == {"TILE": tile_track.SUM_PARTIALS}
    with pytest.raises(Skip, match="needs a Part"):
        tile_track.launch_case(0)


def test_case_selection() -> None:
    assert suite.select(["gemm_f16_*"]) == {f"gemm_f16_{n}" for n in (1024, 2048, 4096, 8192)}
    assert suite.select(["rows"]) == {"softmax", "rms_norm", "layer_norm"}
    assert suite.select(None) == set(suite.all_cases())
    with pytest.raises(ValueError, match="no case matches 'nope'"):
        suite.select(["nope"])


def test_unknown_case_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--dry-run", "--cases", "nope"]) == 2
    assert "no case matches" in capsys.readouterr().err


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--list"]) == 0
    text = capsys.readouterr().out
    assert "gemm_bf16_8192" in text and "launch_8arrays" in text and "compile_cache_hit" in text


def rec(case: str, impl: str, t: float | None, status: model.Status = "ok") -> Record:
    r = Record(case, "elementwise", impl, status, time=t, metric="GB/s", value=1.0 / (t or 1))
    if status != "ok":
        r.reason = "not on this machine"
    return r


def test_ratio_is_best_peer_time_over_time() -> None:
    records = [
        rec("a", model.FEARLESS_SIMT, 2.0),
        rec("a", model.TORCH, 4.0),
        rec("a", model.TRITON, 3.0),
        rec("a", model.CUTILE, None, "skipped"),
        rec("b", model.FEARLESS_SIMT, 1.0),  # no peer ran: no ratio
    ]
    model.assign_ratios(records)
    assert records[0].ratio == pytest.approx(1.5) and records[0].best_peer == model.TRITON
    assert records[2].ratio == pytest.approx(1.0)
    assert records[1].ratio == pytest.approx(0.75)
    assert records[3].ratio is None and records[4].ratio is None


def test_report_files(tmp_path: Path) -> None:
    records = [
        rec("a", model.FEARLESS_SIMT, 2.0),
        rec("a", model.TORCH, 4.0),
        rec("b", model.FEARLESS_SIMT, 8.0),
        rec("b", model.TORCH, 4.0),
        rec("b", model.TRITON, None, "skipped"),
    ]
    model.assign_ratios(records)
    meta = {"command": "fearless bench", "mode": "full", "wall_s": 1.0, "machine": {}}
    written = report.write(tmp_path, meta, {"triton": "triton is not installed"}, records)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert [r["ratio"] for r in doc["records"]][:4] == [2.0, 1.0, 0.5, 1.0]
    md = (tmp_path / "results.md").read_text()
    # geomean of 2.0 and 0.5 is 1.0
    assert "| **geomean, kernels** | **1.000** (n=2) | — | **1.000** (n=2) | |" in md
    assert "skipped **triton** (b): not on this machine" in md
    assert "- triton: triton is not installed" in md
    png = tmp_path / "results.png"
    assert (png in written) == png.exists()
    if not png.exists():
        assert "results.png not written: matplotlib is not installed" in md


def test_geomean() -> None:
    assert report.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert report.geomean([]) is None
    assert report.geomean([float("nan")]) is None


def test_missing_peer_is_a_skipped_record_and_an_error_a_failed_one() -> None:
    torch_stub = types.SimpleNamespace(cuda=types.SimpleNamespace(empty_cache=lambda: None))
    lines: list[str] = []
    ctx = Ctx(torch_stub, None, timing.QUICK, None, True, "sm_90", lines.append)
    case = DeviceCase("vecadd", "elementwise", "f32", reference=lambda: None)

    def missing() -> Prepared:
        raise Skip("triton is not installed")

    def broken() -> Prepared:
        raise RuntimeError("boom")

    out = run_device_case(ctx, case, [("triton", missing), ("cutile", broken)])
    assert [(r.impl, r.status) for r in out] == [("triton", "skipped"), ("cutile", "failed")]
    assert out[0].reason == "triton is not installed"
    assert out[1].reason is not None and out[1].reason.startswith("RuntimeError: boom")
    assert len(lines) == 2 and "skipped: triton is not installed" in lines[0]


def test_timing_helpers() -> None:
    assert timing.quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.5) == 3.0
    assert timing.quantile([1.0, 2.0], 0.2) == pytest.approx(1.2)
    t = timing.summarise([5.0, 1.0, 3.0])
    assert (t.median, t.reps) == (3.0, 3)
    assert timing.reps_for(1.0, timing.FULL) == timing.FULL.max_reps
    assert timing.reps_for(1e6, timing.FULL) == timing.FULL.min_reps


@pytest.mark.parametrize("n,grid", [(0, 2), (1, 3), (255, 1), (4 * 256 * 3 + 77, 3), (9000, 5)])
def test_simt_block_sum_is_exact_on_integers(n: int, grid: int) -> None:
    """The four-way strided loop, its tail, the block reduction and the atomic: every element
    counted once (integers: exact in f32 in any order), with blocks that get no element."""
    from fearless_bench import kernels_simt as K

    x = np.random.default_rng(n).integers(-8, 9, n).astype(np.float32)
    total = np.zeros(1, np.float32)
    K.block_sum[grid, K.SUM_BLOCK](x, total)
    assert total[0] == float(x.astype(np.int64).sum())


@pytest.mark.parametrize("rows,cols", [(3, 1), (2, 64), (5, 33), (2, 1000)])
def test_simt_row_kernels_run_a_block_per_row(rows: int, cols: int) -> None:
    """Rows shorter and longer than the block (1000 columns: 4 passes of 256 threads)."""
    from fearless_bench import family_rows
    from fearless_bench import kernels_simt as K
    from fearless_bench.check import rel_err_numpy

    rng = np.random.default_rng(cols)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w, b = (rng.standard_normal(cols).astype(np.float32) for _ in range(2))
    for name in family_rows.CASES:
        inputs, scalars = family_rows.operands(name, x, w, b)
        ref = family_rows.numpy_reference(name, x, w, b)
        chosen, threads = K.row_kernel(name, cols)
        long = {"softmax": K.softmax, "rms_norm": K.rms_norm, "layer_norm": K.layer_norm}[name]
        for kernel, block in ((chosen, threads), (long, K.ROW_THREADS)):  # both forms
            y = np.full((rows, cols), np.nan, np.float32)
            kernel[rows, block](*inputs, *scalars, y)
            assert rel_err_numpy(y, ref) < 1e-5, (name, kernel.name)
    assert K.row_kernel("softmax", K.ROW_REG_COLS + 1)[0] is K.softmax


def test_simt_row_kernels_refuse_a_short_weight() -> None:
    """Both forms read w at every column of the row: a shorter w is a checked error, never a
    clamped (wrong) weight."""
    from fearless.errors import KernelIndexError
    from fearless_bench import kernels_simt as K

    x = np.ones((2, 100), np.float32)
    w = np.ones(90, np.float32)
    for kernel, block in ((K.rms_norm_registers, K.ROW_REG_THREADS), (K.rms_norm, K.ROW_THREADS)):
        with pytest.raises(KernelIndexError, match="the len is 90 but the index is 9"):
            kernel[2, block](x, w, np.float32(1e-5), np.zeros_like(x))


def test_the_cuda_transpose_twin_has_the_simt_kernels_block() -> None:
    from fearless_bench import kernels_cuda as C
    from fearless_bench import kernels_simt as K

    assert f"#define TRANSPOSE_ROWS {K.TRANSPOSE_ROWS}\n" in C.SOURCE


def test_simt_bench_kernels_are_safe() -> None:
    from fearless_bench import kernels_simt as K
    from fearless_bench.kernels_simt_chunks import CHUNK_KERNELS

    for k in (
        K.softmax,
        K.rms_norm,
        K.layer_norm,
        K.block_sum,
        K.transpose,
        *CHUNK_KERNELS.values(),
    ):
        assert not k.unsafe and "unsafe" not in k.inspect(), k.name


def test_tile_binding_mismatch_is_a_skip_with_the_reason() -> None:
    @tile.kernel
    def two_outputs(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], k: tile.Const[int]):
        z.store(tile.load_like(x, z))

    part = fl.asarray(np.zeros(8, np.float32)).partition((8,))
    with pytest.raises(Skip, match="Const parameter `k` has no value"):
        tile_track.bind(two_outputs, part, [np.zeros(8, np.float32)])
    with pytest.raises(Skip, match="more Tensor parameters than the case has inputs"):
        tile_track.bind(two_outputs, part, [], consts={"k": 1})
    args = tile_track.bind(two_outputs, part, [np.ones(8, np.float32)], consts={"k": 1})
    assert args[0] is part and args[2] == 1


def test_cuda_cpp_twins_compile_with_nvrtc() -> None:
    from fearless_bench import kernels_cuda

    try:
        code = kernels_cuda.compile_cubin("sm_90")
    except Exception as exc:  # no libnvrtc on this machine
        if "nvrtc" not in str(exc).lower():
            raise
        pytest.skip(f"NVRTC is not available: {exc}")
    for name in kernels_cuda.KERNELS:
        assert f"void {name}(" in kernels_cuda.SOURCE
    assert bytes(code.code)[:4] == b"\x7fELF"


@pytest.mark.slow  # the NVRTC test above compiles the same twins (CI's time limit)
def test_cuda_cpp_twins_compile_with_nvcc(tmp_path: Path) -> None:
    """Where NVRTC cannot run (no driver), nvcc still checks the twins' source, every kernel."""
    import shutil
    import subprocess

    from fearless_bench import kernels_cuda

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    src = tmp_path / "twins.cu"
    src.write_text(kernels_cuda.SOURCE)
    cmd = [
        nvcc,
        "-arch=sm_90",
        "-cubin",
        "-Xptxas",
        "-v",
        "-o",
        str(tmp_path / "t.cubin"),
        str(src),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for name in kernels_cuda.KERNELS:
        assert f"Compiling entry function '{name}'" in done.stderr, name


def test_cutile_peers_compile_to_cubins() -> None:
    """The cuTile Python peers compile for sm_90 with no GPU (they run only on the device)."""
    ct = pytest.importorskip("cuda.tile")
    comp = pytest.importorskip("cuda.tile.compilation")
    if toolchain.find_tileiras() is None:
        pytest.skip("tileiras is not installed")
    from fearless_bench import kernels_cutile as kc

    def arr(dtype: object, ndim: int) -> object:
        return comp.ArrayConstraint(
            dtype,
            ndim,
            index_dtype=ct.int32,
            stride_lower_bound_incl=0,
            alias_groups=(),
            may_alias_internally=False,
        )

    f32, f16, scalar = ct.float32, ct.float16, comp.ScalarConstraint(ct.float32)
    signatures = {
        "_vecadd": [arr(f32, 1), arr(f32, 1), arr(f32, 1), 1024],
        "_saxpy": [scalar, arr(f32, 1), arr(f32, 1), arr(f32, 1), 1024],
        "_sum_partials": [arr(f32, 1), arr(f32, 1), 4, 4096],
        "_sum_final": [arr(f32, 1), arr(f32, 1), 1024],
        "_softmax": [arr(f32, 2), arr(f32, 2), 1024],
        "_rms_norm": [arr(f32, 2), arr(f32, 1), arr(f32, 2), scalar, 1000, 1024],
        "_layer_norm": [arr(f32, 2), arr(f32, 1), arr(f32, 1), arr(f32, 2), scalar, 1000, 1024],
        "_transpose": [arr(f32, 2), arr(f32, 2), 64, 64],
        "_matmul": [arr(f16, 2), arr(f16, 2), arr(f16, 2), 128, 128, 64],
        "_args3": [arr(f32, 1), arr(f32, 1), arr(f32, 1), 256],
    }
    for name, params in signatures.items():
        sig = comp.KernelSignature(params, comp.CallingConvention.cutile_python_v1())
        buf = io.BytesIO()
        comp.export_kernel(getattr(kc, name), [sig], buf, gpu_code="sm_90", output_format="cubin")
        assert buf.getvalue()[:4] == b"\x7fELF", name


def test_check_verdicts() -> None:
    from fearless_bench import check

    assert check.verdict(1e-7, "f32") is None
    assert "exceeds" in (check.verdict(1e-2, "f16") or "")
    assert "NaN" in (check.verdict(math.nan, "f32") or "")
    assert "not written" in (check.verdict(0.0, "f32", unwritten=3) or "")
    assert check.rel_err_numpy(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0.0


def test_a_family_that_raises_fails_its_cases_not_the_run() -> None:
    fam = types.ModuleType("family_x")
    fam.FAMILY = "x"
    lines: list[str] = []
    opts = suite.Options(out=Path("unused"), log=lines.append)

    def crash(first: object, chosen: set[str]) -> list[Record]:
        raise MemoryError("out of device memory")

    out = suite.run_family(opts, fam, {"b", "a"}, crash, None)
    assert [(r.case, r.status) for r in out] == [("a", "failed"), ("b", "failed")]
    assert out[0].reason is not None and "MemoryError: out of device memory" in out[0].reason
    assert lines and "the x family stopped" in lines[0]
