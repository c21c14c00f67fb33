"""SIMT raw coordinates, grid-stride loops, conditional expressions, tuple unpacking, weak
`float`/`int` parameters and `with simt.unsafe():` regions: the simulator against NumPy, the
errors, the IR (and its verifier), and the LLVM lowering through ptxas.
"""

from __future__ import annotations

import numpy as np
import pytest
import simt_kernels as K

import fearless as fl
from fearless import dtypes, simt
from fearless.backends.llvm.lower import lower_function
from fearless.backends.llvm.ptx import coarsenable, compile_ptx, ptxas_check
from fearless.backends.toolchain import find_ptxas
from fearless.errors import InternalError, KernelIndexError, KernelTypeError, Location
from fearless.ir.core import THREAD_INDEX, Function
from fearless.ir.simt import ops
from fearless.ir.simt.verifier import verify
from support.simt_coords_kernels import (
    _expected_coords,
    clamp,
    coords_3d,
    lazy_arm,
    python_math,
    strided_sum,
)

RNG = np.random.default_rng(10)
ARCHS = ("sm_80", "sm_90", "sm_90a")


# --------------------------------------------------------------------------- kernels


@simt.kernel
def axpy_i32(
    alpha: int, x: simt.Slice[fl.i32], y: simt.Slice[fl.i32], out: simt.DisjointSlice[fl.i32]
):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = alpha * x[i] + y[i]


# ------------------------------------------------------------------------ simulator


@pytest.mark.parametrize(("grid", "block"), [((2, 3), (8, 4, 2)), ((3, 1), (5, 7, 3))])
def test_raw_coordinates_match_numba_semantics(grid: tuple[int, int], block: tuple) -> None:
    n = grid[0] * grid[1] * block[0] * block[1] * block[2]
    out = np.full((n, 5), -7, np.int64)
    coords_3d[grid, block](out)
    np.testing.assert_array_equal(out, _expected_coords(grid, block))


def test_example_thread_ids() -> None:
    out = np.zeros(200, np.int64)
    K.thread_ids[4, 64](out)
    i = np.arange(200)
    np.testing.assert_array_equal(out, (i // 64) * 1_000_000 + (i % 64) * 1000 + i % 32)


@pytest.mark.parametrize(("grid", "block"), [(1, 32), (3, 64), (64, 128)])
def test_grid_stride_covers_every_element_once(grid: int, block: int) -> None:
    x = RNG.standard_normal(1000).astype(np.float32)
    out = np.full(1000, np.nan, np.float32)
    K.scale_positive[grid, block](1.5, x, out)
    np.testing.assert_array_equal(out, np.where(x > 0, np.float32(1.5) * x, x))


def test_grid_stride_stop_past_the_output_is_a_checked_error() -> None:
    x = np.arange(300, dtype=np.float64)
    out = np.zeros(300, np.float64)
    strided_sum[2, 32](x, 300, out)
    np.testing.assert_array_equal(out, 2 * x)
    with pytest.raises(KernelIndexError, match=r"the len is 250 but the index is 25[0-9]"):
        strided_sum[2, 32](x, 300, np.zeros(250, np.float64))


def test_grid_stride_write_is_proven_when_the_stop_is_the_length() -> None:
    text = K.scale_positive.inspect(stage="ir")
    assert "index.advance" in text
    # out's write is proven by the loop condition; x's reads too when len(x) >= len(out).
    assert "1 proven by guards" in text
    assert "len(x) >= len(out) (checked at launch): 0 bounds check(s) remain" in text


def test_conditional_expression_evaluates_only_the_chosen_arm() -> None:
    x = RNG.standard_normal(40).astype(np.float32)
    out = np.zeros(64, np.float32)
    lazy_arm[1, 64](x, out)
    np.testing.assert_array_equal(out[:40], x * np.float32(2.0))
    np.testing.assert_array_equal(out[40:], np.full(24, -1.0, np.float32))


def test_float_parameters_adopt_the_element_type() -> None:
    x = RNG.standard_normal(300).astype(np.float32)
    out = np.zeros(300, np.float32)
    clamp[2, 256](x, -0.5, 0.75, out)
    np.testing.assert_array_equal(out, np.clip(x, np.float32(-0.5), np.float32(0.75)))
    text = clamp.inspect(stage="ir")
    assert "%1: f64, %2: f64" in text and "cast %1 : f32" in text  # f64 on the ABI


def test_int_parameter_adopts_i32() -> None:
    x = RNG.integers(-100, 100, 64).astype(np.int32)
    y = RNG.integers(-100, 100, 64).astype(np.int32)
    out = np.zeros(64, np.int32)
    axpy_i32[1, 64](3, x, y, out)
    np.testing.assert_array_equal(out, 3 * x + y)


def test_weak_values_compute_in_f64_until_they_meet_f32() -> None:
    out = np.zeros(8, np.float32)
    python_math[1, 8](0.1, 7, out)
    assert out[0] == np.float32(0.1 * 7 / 3.0 + abs(-0.1))
    python_math[1, 8](0.1, 0, out)
    assert out[0] == np.float32(-0.1)


@simt.device
def scaled(v: fl.f32, s: fl.f32) -> fl.f32:
    return v * s


@simt.kernel
def accumulate(x: simt.Slice[fl.f32], lo: float, n: int, out: simt.DisjointSlice[fl.f32]):
    """A weak start value carried by a loop takes the body's f32, as `acc = 0.0` would."""
    i = simt.thread.index_1d()
    if i < len(out):
        acc = lo
        for _ in range(n):
            acc = acc + scaled(x[i], lo)
        out[i] = acc


def test_weak_value_through_a_loop_and_a_device_function() -> None:
    x = RNG.standard_normal(50).astype(np.float32)
    out = np.zeros(50, np.float32)
    accumulate[1, 64](x, 0.5, 3, out)
    expected = np.full(50, 0.5, np.float32)
    for _ in range(3):
        expected = expected + x * np.float32(0.5)
    np.testing.assert_array_equal(out, expected)


@simt.kernel
def floor_at(x: simt.Slice[fl.f32], lo: float, out: simt.DisjointSlice[fl.f32]):
    """A variable that starts as a weak value takes the type an `if` gives it."""
    i = simt.thread.index_1d()
    if i < len(out):
        s = lo
        if x[i] > s:
            s = x[i]
        out[i] = s


def test_weak_value_joins_an_f32_branch() -> None:
    x = RNG.standard_normal(50).astype(np.float32)
    out = np.zeros(50, np.float32)
    floor_at[1, 64](x, 0.25, out)
    np.testing.assert_array_equal(out, np.maximum(x, np.float32(0.25)))


def test_float_parameter_with_int_elements_is_refused() -> None:
    @simt.kernel
    def shift(x: simt.Slice[fl.i32], lo: float, out: simt.DisjointSlice[fl.i32]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = x[i] + lo

    with pytest.raises(KernelTypeError, match="a `float` parameter") as info:
        shift.inspect(stage="ir")
    assert "fl.i32(lo)" in str(info.value)


def test_unsafe_region_writes_anywhere_and_is_reported() -> None:
    x = RNG.standard_normal(100).astype(np.float32)
    out = np.zeros(100, np.float32)
    K.reverse[1, 128](x, out)
    np.testing.assert_array_equal(out, x[::-1])
    text = K.reverse.inspect(stage="ir")
    assert "// unsafe: `with simt.unsafe():` at line" in text
    with pytest.raises(KernelIndexError) as info:
        K.reverse[1, 128](x, np.zeros(60, np.float32))
    assert "inside `with simt.unsafe():`" in str(info.value)
    assert "unsafe" not in K.scale_positive.inspect(stage="ir").split("func")[0]


def test_raw_coordinate_write_names_both_ways_out() -> None:
    @simt.kernel
    def bad(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        out[simt.grid(1)] = x[simt.grid(1)]

    with pytest.raises(fl.SafetyError) as info:
        bad.inspect(stage="ir")
    message = str(info.value)
    assert "simt.thread.index_1d()" in message and "with simt.unsafe():" in message


# ------------------------------------------------------------------------- IR, LLVM


def test_verifier_refuses_a_forged_grid_stride() -> None:
    loc = Location("t.py", 1, 0)
    fn = Function("forged", loc)
    entry = fn.new_block("entry")
    t = entry.append(ops.ThreadIndex1D(loc)).result
    one = entry.append(ops.Constant(1, dtypes.i64, loc)).result
    entry.append(ops.IndexAdvance(t, one, loc))
    entry.append(ops.Return(loc))
    with pytest.raises(InternalError, match="operand types do not fit"):
        verify(fn)
    assert entry.ops[2].result.type == THREAD_INDEX


def _llvm(kernel: simt.Kernel) -> str:
    ir = kernel.compiled_ir()
    return str(lower_function(ir.fn, ir.params, ir.contract, kernel.name))


def test_llvm_reads_the_special_registers() -> None:
    text = _llvm(coords_3d)
    for reg in ("tid.x", "tid.y", "tid.z", "ntid.z", "ctaid.y", "nctaid.x", "laneid"):
        assert f"llvm.nvvm.read.ptx.sreg.{reg}" in text, reg
    grid_stride = _llvm(K.scale_positive)
    assert '%"next" = add nuw nsw i64' in grid_stride
    assert not coarsenable(K.scale_positive.compiled_ir().fn)  # its stride is the grid's


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")
@pytest.mark.parametrize(
    "kernel",
    [
        coords_3d,
        K.scale_positive,
        K.thread_ids,
        K.reverse,
        lazy_arm,
        clamp,
        python_math,
        accumulate,
    ],
)
def test_kernels_assemble_everywhere(kernel: simt.Kernel) -> None:
    text = _llvm(kernel)
    for arch in ARCHS:
        report = ptxas_check(compile_ptx(text, arch), arch)
        assert f"Compiling entry function '{kernel.name}' for '{arch}'" in report


@simt.kernel
def grid_pair_index(a: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    """numba's `a[cuda.grid(2)]` reads a[x, y] (x the column): here the transpose, twice."""
    t = simt.thread.index_2d()
    g = simt.grid(2)
    if t.row < out.shape[0] and t.col < out.shape[1]:
        out[t] = a[g] + a[g[0], g[1]]


def test_grid_pair_indexes_a_2d_slice() -> None:
    a = RNG.standard_normal((24, 24)).astype(np.float32)
    out = np.zeros((24, 24), np.float32)
    grid_pair_index[(3, 3), (8, 8)](a, out)
    np.testing.assert_array_equal(out, a.T + a.T)


@simt.kernel
def unpack(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    """Written-out tuples unpack, every value first: `a, b = b, a` swaps."""
    t = simt.thread.index_2d()
    r, c = t.row, t.col
    a, b = fl.f32(r), fl.f32(c)
    a, b = b, a
    if r < out.shape[0] and c < out.shape[1]:
        out[t] = x[r, c] + 100 * a + b


def test_a_written_tuple_unpacks_and_swaps() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.zeros_like(x)
    unpack[(1, 1), (4, 3)](x, out)
    r, c = np.indices(x.shape)
    np.testing.assert_array_equal(out, x + 100 * c + r)
