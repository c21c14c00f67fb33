"""Edges the simulator and the compiler must refuse clearly, or handle: strided NumPy views in
`fl.from_numpy`, garbage streams, allocations larger than the machine, launches of more threads
than the simulator runs, and expressions thousands of terms long."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config, simt, tile
from fearless.frontend import core
from fearless.runtime import arrays
from fearless.runtime.target import Target


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


@simt.kernel
def fill(out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = 1.0


@tile.kernel
def tile_fill(out: tile.Part[fl.f32]):
    out.store(tile.full((16,), 1.0, fl.f32))


@simt.kernel
def double(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = x[i] * 2.0


# ------------------------------------------------------------------- 1. strided NumPy views


def test_from_numpy_refuses_a_strided_view() -> None:
    a = np.zeros((4, 8), np.float32)
    for view in (a[:, ::2], a.T, a[::2]):
        with pytest.raises(fl.KernelTypeError, match="needs a C-contiguous array") as e:
            fl.from_numpy(view)
        assert e.value.code == "E0701"
        assert e.value.loc is not None and e.value.loc.file == __file__
        assert "np.ascontiguousarray" in (e.value.help or "")
        assert "x[...] = t.numpy()" in (e.value.help or "")


def test_from_numpy_still_shares_a_contiguous_array() -> None:
    a = np.zeros(32, np.float32)
    middle = fl.from_numpy(a[8:24])  # a contiguous slice: shared, written in place
    fill[1, 16](middle)
    assert a[8:24].sum() == 16 and a[:8].sum() == 0 and a[24:].sum() == 0
    assert fl.asarray(a[::2]).shape == (16,)  # fl.asarray still copies what it must


def test_non_contiguous_help_fits_the_array_library() -> None:
    a = np.arange(16, dtype=np.float32)
    with pytest.raises(fl.KernelTypeError, match="`x` is not contiguous") as e:
        arrays.describe(a[::2], Target.SIM, name="x")
    assert "np.ascontiguousarray(x)" in (e.value.help or "")
    assert ".contiguous()" not in (e.value.help or "")
    out = np.zeros(16, np.float32)
    with pytest.raises(fl.KernelTypeError, match="`out` is not contiguous") as e:
        double[1, 8](a[:8], out[::2])
    assert "np.ascontiguousarray(x)" in (e.value.help or "")


def test_non_contiguous_help_for_torch() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(fl.KernelTypeError, match="`x` is not contiguous") as e:
        arrays.describe(torch.zeros(16)[::2], Target.SIM, name="x")
    assert "x.contiguous()" in (e.value.help or "")
    assert "ascontiguousarray" not in (e.value.help or "")


# ------------------------------------------------------------------------------ 2. streams


def test_simulator_refuses_what_is_not_a_stream() -> None:
    out = fl.zeros(8)
    for bad in ("not a stream", 1.5, -1, True, object()):
        with pytest.raises(fl.KernelTypeError, match="is not a CUDA stream") as e:
            fill[1, 8, bad](out)
        assert e.value.code == "E0701"
        assert e.value.loc is not None and e.value.loc.file == __file__
    with pytest.raises(fl.KernelTypeError, match="`str` is not a CUDA stream"):
        fill(fill.prepare(1, 8), out, stream="x")
    assert out.numpy().sum() == 0  # nothing ran


def test_tile_simulator_refuses_what_is_not_a_stream() -> None:
    part = fl.zeros(64).partition((16,))
    for bad in ("not a stream", 1.5, -1, object()):
        with pytest.raises(fl.KernelTypeError, match="is not a CUDA stream") as e:
            tile_fill(part, stream=bad)
        assert e.value.code == "E0701"
        assert e.value.loc is not None and e.value.loc.file == __file__
    tile_fill(part, stream=fl.Stream())
    assert part.unpartition().numpy().sum() == 64


def test_simulator_takes_every_stream_the_gpu_takes() -> None:
    class Protocol:
        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, 0)

    out = fl.zeros(8)
    for good in (None, 0, 7, fl.Stream(), Protocol()):
        out.numpy()[:] = 0
        fill[1, 8, good](out)
        assert out.numpy().sum() == 8
    fill(fill.prepare(1, 8), out, stream=fl.Stream())


# ------------------------------------------------------------------ 3. allocations too large

# Sizes past any machine's address space (a 64-bit process maps at most 2**57 bytes), so that
# the allocation fails wherever the test runs, whatever the kernel's overcommit policy.
HUGE = 1 << 56  # f32 elements: 256 PiB


def test_huge_tensor_on_the_simulator_is_a_clear_error() -> None:
    for make in (
        lambda: fl.empty(HUGE),
        lambda: fl.zeros((1 << 28, 1 << 28)),
        lambda: fl.full(HUGE, 1.0),
        lambda: fl.empty((1 << 62, 1 << 62), dtype=fl.f64),  # more bytes than NumPy counts
    ):
        with pytest.raises(fl.OutOfMemoryError, match="more than this machine could allocate") as e:
            make()
        assert e.value.loc is not None and e.value.loc.file == __file__
        assert "smaller tensors" in (e.value.help or "")
    with pytest.raises(fl.OutOfMemoryError, match=r"1,152,921,504,606,846,976 bytes \(1.0 EiB\)"):
        fl.empty(1 << 60, dtype=fl.u8)
    with pytest.raises(
        fl.OutOfMemoryError,
        match=r"\(4503599627370496,\) and i64 needs 36,028,797,018,963,968 bytes",
    ):
        fl.arange(0, 1 << 52)


def test_the_gpu_out_of_memory_is_e0704_at_the_users_line_not_a_driver_problem() -> None:
    """CUDA_ERROR_OUT_OF_MEMORY from an allocation or a launch is the user's OutOfMemoryError
    (also a MemoryError), with help, not E0900's "a driver or fearless problem" (as 12 GPU tests
    at once once read on the H100); any other driver error stays E0900. Without a driver the
    free-memory note is left out rather than failing."""
    from fearless.runtime import driver

    result = driver.cu().CUresult
    err = driver.driver_error(result.CUDA_ERROR_OUT_OF_MEMORY, "launching `attention`")
    assert isinstance(err, fl.OutOfMemoryError) and isinstance(err, MemoryError)
    assert err.code == "E0704" and "the GPU is out of memory" in err.message
    assert err.loc is not None and err.loc.file == __file__
    assert "nvidia-smi" in (err.help or "") and "del" in (err.help or "")
    other = driver.driver_error(result.CUDA_ERROR_LAUNCH_FAILED, "launching `attention`")
    assert isinstance(other, fl.ToolchainError) and other.code == "E0900"


def test_nbytes_text() -> None:
    assert arrays.nbytes_text(100) == "100 bytes"
    assert arrays.nbytes_text(256 << 30) == "274,877,906,944 bytes (256.0 GiB)"
    assert arrays.nbytes_text(4 << 40) == "4,398,046,511,104 bytes (4.0 TiB)"


def _module(tmp_path: Path, name: str, source: str) -> ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HUGE_TILE = """
import fearless as fl
from fearless import tile


@tile.kernel
def big(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    a = tile.zeros(({n}, {n}), fl.f32)
    z.store(tile.load_like(x, z) + tile.sum(tile.sum(a, 1), 0))
"""


@pytest.mark.parametrize(("n", "size"), [(1 << 26, "16.0 PiB"), (1 << 31, "16.0 EiB")])
def test_huge_tile_on_the_simulator_is_a_clear_error(tmp_path: Path, n: int, size: str) -> None:
    m = _module(tmp_path, f"huge_tile_{n}", HUGE_TILE.format(n=n))
    zp = fl.zeros(64).partition((64,))
    with pytest.raises(fl.LaunchContractError, match=rf"shape \({n}, {n}\) and f32 .*{size}") as e:
        m.big(zp, fl.zeros(64))
    assert e.value.loc is not None
    assert e.value.loc.file.endswith(f"huge_tile_{n}.py") and e.value.loc.line == 8
    assert "smaller tiles" in (e.value.help or "")


# ------------------------------------------------------------------- 4. too many threads


def test_simulator_refuses_a_launch_of_too_many_threads() -> None:
    out = fl.zeros(8)
    with pytest.raises(fl.LaunchContractError) as e:
        fill[2**31 - 1, 1024](out)
    msg = str(e.value)
    assert "2,199,023,254,528 threads" in msg and "67,108,864" in msg
    assert "FEARLESS_SIM_MAX_THREADS=2199023254528" in (e.value.help or "")
    assert e.value.loc is not None and e.value.loc.file == __file__
    with pytest.raises(fl.LaunchContractError, match="2,199,023,254,528 threads"):
        fill.prepare(2**31 - 1, 1024)
    assert out.numpy().sum() == 0


def test_the_thread_limit_is_an_environment_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.sim_max_threads() == 1 << 26
    monkeypatch.setenv("FEARLESS_SIM_MAX_THREADS", "1_000")
    assert config.sim_max_threads() == 1000
    out = fl.zeros(1024)
    fill[125, 8](out)  # exactly 1000 threads
    assert out.numpy().sum() == 1000
    with pytest.raises(fl.LaunchContractError, match=r"1,024 threads .* 1,000"):
        fill[128, 8](out)
    monkeypatch.setenv("FEARLESS_SIM_MAX_THREADS", "lots")
    with pytest.raises(fl.LaunchContractError, match="must be a positive whole number, not 'lots'"):
        fill[1, 8](out)
    monkeypatch.setenv("FEARLESS_SIM_MAX_THREADS", "0")
    with pytest.raises(ValueError, match="positive whole number"):
        config.sim_max_threads()


# ------------------------------------------------------------------ 5. deep expressions

LONG_SIMT = """
import fearless as fl
from fearless import simt


@simt.kernel
def long_sum(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = {expr}
"""

LONG_TILE = """
import fearless as fl
from fearless import tile


@tile.kernel
def long_sum(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    a = tile.load_like(x, z)
    z.store({expr})
"""


def _run_both(tmp_path: Path, name: str, simt_expr: str, tile_expr: str) -> tuple[Any, Any]:
    ms = _module(tmp_path, f"{name}_simt", LONG_SIMT.format(expr=simt_expr))
    mt = _module(tmp_path, f"{name}_tile", LONG_TILE.format(expr=tile_expr))
    x = np.linspace(0.5, 1.5, 64, dtype=np.float32)
    out = fl.zeros(64)
    ms.long_sum[1, 64](fl.from_numpy(x), out)
    zp = fl.zeros(64).partition((64,))
    mt.long_sum(zp, fl.from_numpy(x))
    return out.numpy(), zp.unpartition().numpy()


def test_a_2000_term_sum_compiles_on_both_tracks(tmp_path: Path) -> None:
    limit = sys.getrecursionlimit()
    got_simt, got_tile = _run_both(
        tmp_path, "sum2000", " + ".join(["x[i]"] * 2000), " + ".join(["a"] * 2000)
    )
    x = np.linspace(0.5, 1.5, 64, dtype=np.float32)
    ref = np.zeros(64, np.float32)
    for _ in range(2000):
        ref += x
    np.testing.assert_array_equal(got_simt, ref)
    np.testing.assert_array_equal(got_tile, ref)
    assert sys.getrecursionlimit() == limit


def test_a_long_mixed_chain_keeps_python_order(tmp_path: Path) -> None:
    terms = [("+", "x[i]"), ("*", "0.5"), ("-", "x[i]"), ("/", "2.0")] * 300
    simt_expr = "x[i]" + "".join(f" {op} {t}" for op, t in terms)
    tile_expr = simt_expr.replace("x[i]", "a")
    got_simt, got_tile = _run_both(tmp_path, "mixed", simt_expr, tile_expr)
    x = np.linspace(0.5, 1.5, 64, dtype=np.float32)
    f32 = simt_expr.replace("x[i]", "x").replace("0.5", "h").replace("2.0", "two")
    ref = eval(f32, {"x": x, "h": np.float32(0.5), "two": np.float32(2.0)})
    np.testing.assert_allclose(got_simt, ref, rtol=1e-5)
    np.testing.assert_allclose(got_tile, ref, rtol=1e-5)


def test_deep_right_nested_expressions_compile(tmp_path: Path) -> None:
    n = 1500  # `- - - x`, `x ** x ** x`: trees CPython compiles that are not left chains
    got_simt, got_tile = _run_both(tmp_path, "neg", "-" * n + " x[i]", "-" * n + " a")
    x = np.linspace(0.5, 1.5, 64, dtype=np.float32)
    np.testing.assert_array_equal(got_simt, x)
    np.testing.assert_array_equal(got_tile, x)
    pow_simt, pow_tile = _run_both(
        tmp_path, "pow", " ** ".join(["1.0"] * n + ["x[i]"]), " ** ".join(["1.0"] * n + ["a"])
    )
    np.testing.assert_array_equal(pow_simt, np.ones(64, np.float32))
    np.testing.assert_array_equal(pow_tile, np.ones(64, np.float32))


def test_an_unsupported_operator_in_a_long_chain_names_its_own_node(tmp_path: Path) -> None:
    prefix = " * ".join(["x[i]"] * 500) + " @ x[i]"  # `((x * x) ... @ x) * x ...`
    expr = prefix + " * " + " * ".join(["x[i]"] * 500)
    m = _module(tmp_path, "matmul_chain", LONG_SIMT.format(expr=expr))
    with pytest.raises(fl.CompileError, match="the operator in") as e:
        m.long_sum[1, 64](fl.zeros(64), fl.zeros(64))
    assert f"the operator in `{prefix}` is not supported" in e.value.message
    loc = e.value.loc
    assert loc is not None and loc.line == 10 and loc.end_col == loc.col + len(prefix)


def test_too_deep_a_statement_is_a_compile_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core, "MAX_NESTING", 300)
    for track, src, expr in (("simt", LONG_SIMT, "x[i]"), ("tile", LONG_TILE, "a")):
        m = _module(tmp_path, f"deep_{track}", src.format(expr=" + ".join([expr] * 400)))
        with pytest.raises(fl.CompileError, match=r"nested 40[0-9] levels deep, more than the 300"):
            if track == "simt":
                m.long_sum[1, 64](fl.zeros(64), fl.zeros(64))
            else:
                m.long_sum(fl.zeros(64).partition((64,)), fl.zeros(64))


def test_a_12000_term_sum_is_a_compile_error_at_its_line(tmp_path: Path) -> None:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200_000)  # what it takes CPython to compile the module at all
    try:
        for track, src, expr, line in (
            ("simt", LONG_SIMT, "x[i]", 10),
            ("tile", LONG_TILE, "a", 9),
        ):
            # just past MAX_NESTING (10_000): the real limit, with CPython's own recursion
            m = _module(tmp_path, f"sum12000_{track}", src.format(expr=" + ".join([expr] * 12_000)))
            with pytest.raises(fl.CompileError, match=r"nested 1200[0-9] levels deep") as e:
                if track == "simt":
                    m.long_sum[1, 64](fl.zeros(64), fl.zeros(64))
                else:
                    m.long_sum(fl.zeros(64).partition((64,)), fl.zeros(64))
            assert e.value.code == "E0001"
            assert e.value.loc is not None and e.value.loc.line == line
            assert sys.getrecursionlimit() == 200_000
    finally:
        sys.setrecursionlimit(limit)


def test_nesting_depth_stops_at_nested_statements() -> None:
    tree = ast.parse("if a:\n    y = " + " + ".join(["x"] * 100) + "\n").body[0]
    assert isinstance(tree, ast.If)
    assert core.nesting_depth(tree) == 3  # If -> Name `a` -> Load
    assert core.nesting_depth(tree.body[0]) == 102  # Assign -> 99 BinOps -> Name -> Load
