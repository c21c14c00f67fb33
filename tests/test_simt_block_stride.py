"""`simt.thread.block_stride(n)` and `block_column(k)`: a row per block, several columns per
thread, all safe; `simt.local.array`: a thread's own array (registers when indexed by constants).

The simulator against NumPy (every element written once, for 1-D, 2-D and 3-D blocks and
grids, rows shorter and longer than the block), the launch errors, the IR (the BlockIndex
counter, the verifier's stride rule, the bounds the loop proves) and the LLVM lowering
through ptxas, with a fixed block's `ntid` as a constant. The compile-fail corpus holds the
refusals (`block_stride_*.py`); tests/gpu/test_simt_block_stride_gpu.py runs these kernels on
the GPU against the simulator.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fearless import dtypes, simt
from fearless.backends.llvm.lower import lower_function
from fearless.backends.llvm.ptx import compile_ptx, ptxas_check
from fearless.backends.toolchain import find_ptxas
from fearless.errors import InternalError, KernelIndexError, Location
from fearless.ir.core import BLOCK_INDEX, Function
from fearless.ir.simt import ops
from fearless.ir.simt.verifier import verify
from support.block_stride_kernels import (
    column_of,
    coordinates,
    local_2d,
    owners,
    rms_norm,
    rms_norm_registers,
    softmax,
)

RNG = np.random.default_rng(31)
ARCHS = ("sm_80", "sm_90")


# --------------------------------------------------------------------------- kernels


# ------------------------------------------------------------------------ simulator


@pytest.mark.parametrize(
    ("grid", "block", "cols"),
    [
        (3, 32, 100),  # 4 columns per thread, the last partly
        (4, 64, 64),  # one column per thread
        (2, 128, 50),  # fewer columns than threads: the rest never enter the loop
        ((2, 3), (16, 4), 70),  # 2-D grid and block: rows by the linear block index
        ((2, 1, 2), (8, 2, 2), 33),  # 3-D
    ],
)
def test_each_element_is_written_once_by_its_rows_block(grid, block, cols) -> None:
    dims = [grid] if isinstance(grid, int) else list(grid)
    bdims = [block] if isinstance(block, int) else list(block)
    rows, threads = math.prod(dims), math.prod(bdims)
    out = np.zeros((rows, cols), np.int64)
    owners[grid, block](out)
    c = np.arange(cols)
    np.testing.assert_array_equal(out, np.broadcast_to(1 + c % threads, (rows, cols)))
    coordinates[grid, block](out)
    np.testing.assert_array_equal(out, np.arange(rows)[:, None] * 100000 + c)


def test_rows_kernels_match_numpy() -> None:
    x = RNG.standard_normal((6, 300)).astype(np.float32)
    w = RNG.standard_normal(300).astype(np.float32)
    out = np.zeros_like(x)
    rms_norm[6, 128](x, w, 1e-5, out)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-6)
    softmax[6, 256](x, out)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=2e-6, atol=1e-7)


def test_registers_kernel_matches_numpy_and_keeps_its_array_out_of_memory() -> None:
    x = RNG.standard_normal((5, 230)).astype(np.float32)  # 230 < 4 * 64: the last step partial
    w = RNG.standard_normal(230).astype(np.float32)
    out = np.full_like(x, np.nan)
    rms_norm_registers[5, 64](x, w, out)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True)) * w
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-6)
    ptx = compile_ptx(_llvm(rms_norm_registers), "sm_90")
    assert ".local" not in ptx  # every index is a constant once LLVM unrolls `range(PER)`


def test_block_column_is_step_k_and_a_bad_step_fails_checked() -> None:
    out = np.full((2, 96), -1, np.int64)
    column_of[2, 32](1, out)
    np.testing.assert_array_equal(out[:, 32:64], np.broadcast_to(np.arange(32, 64), (2, 32)))
    assert (out[:, :32] == -1).all() and (out[:, 64:] == -1).all()
    for k in (3, -1):  # past the row, and negative (as a huge unsigned step)
        with pytest.raises(KernelIndexError, match="the len is 96"):
            column_of[2, 32](k, out)


def test_local_arrays_are_per_thread_and_bounds_checked() -> None:
    out = np.zeros(40, np.int64)
    local_2d[2, 32](3, out)
    t = np.arange(40)
    np.testing.assert_array_equal(out, 3 * (t * 10) + 3 + 4 + 5)
    with pytest.raises(KernelIndexError, match="the len is 3 but the index is 3"):
        local_2d[2, 32](4, out)


def test_a_grid_with_more_blocks_than_rows_fails_checked() -> None:
    out = np.zeros((3, 40), np.int64)
    with pytest.raises(KernelIndexError, match=r"the len is 3 but the index is 3"):
        coordinates[4, 32](out)


# --------------------------------------------------------------------------- the IR


def test_the_loop_counter_is_a_block_index_and_the_reads_are_proven() -> None:
    text = rms_norm.inspect(stage="ir")
    assert "index.block_row" in text and ": BlockIndex" in text
    # A column below the loop's stop is proven (x's in the first loop, out's in the second);
    # the row (the block) is checked, and so are x's and w's columns in the loop to out's.
    assert "5 bounds check(s) remain on the device, 2 proven by guards" in text
    one = coordinates.inspect(stage="ir")
    assert "1 bounds check(s) remain on the device, 1 proven by guards" in one


def _forged(stride_regs: tuple[str, ...], start: type[ops.Op]) -> Function:
    loc = Location("t.py", 1, 0)
    fn = Function("forged", loc)
    entry = fn.new_block("entry")
    e = entry.append
    regs = [
        e(ops.Cast(e(ops.SpecialReg(r, loc)).result, dtypes.i64, loc)).result for r in stride_regs
    ]
    step = regs[0]
    for r in regs[1:]:
        step = e(ops.Binary("mul", step, r, loc)).result
    index = e(start(loc)).result
    e(ops.IndexAdvance(index, step, loc))
    e(ops.Return(loc))
    return fn


def test_verifier_takes_only_the_blocks_thread_count_as_a_block_index_stride() -> None:
    verify(_forged(("ntid.x", "ntid.y", "ntid.z"), ops.BlockIndex1D))
    verify(_forged(("nctaid.x", "ntid.x"), ops.ThreadIndex1D))
    for regs, start in [
        (("ntid.x",), ops.BlockIndex1D),  # a 1-D stride in a 3-D block: two threads meet
        (("nctaid.x", "ntid.x"), ops.BlockIndex1D),
        (("ntid.x", "ntid.y", "ntid.z"), ops.ThreadIndex1D),
    ]:
        with pytest.raises(InternalError, match="operand types do not fit"):
            verify(_forged(regs, start))
    fn = _forged(("ntid.x", "ntid.y", "ntid.z"), ops.BlockIndex1D)
    assert fn.blocks[0].ops[-2].result.type == BLOCK_INDEX


def test_verifier_refuses_a_block_row_of_a_thread_index() -> None:
    loc = Location("t.py", 1, 0)
    fn = Function("forged", loc)
    entry = fn.new_block("entry")
    t = entry.append(ops.ThreadIndex1D(loc)).result
    entry.append(ops.BlockRowIndex(t, loc))
    entry.append(ops.Return(loc))
    with pytest.raises(InternalError, match="operand types do not fit"):
        verify(fn)


# ------------------------------------------------------------------------------- LLVM


def _llvm(kernel: simt.Kernel) -> str:
    ir = kernel.compiled_ir()
    return str(lower_function(ir.fn, ir.params, ir.contract, kernel.name))


def test_a_fixed_block_makes_the_stride_a_constant() -> None:
    fixed = _llvm(rms_norm)  # block=128
    assert "sreg.ntid" not in fixed
    assert "sreg.ntid.x" in _llvm(softmax)  # launch_bounds only: the block is read


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")
@pytest.mark.parametrize(
    "kernel", [owners, coordinates, rms_norm, softmax, rms_norm_registers, column_of, local_2d]
)
def test_kernels_assemble(kernel: simt.Kernel) -> None:
    text = _llvm(kernel)
    for arch in ARCHS:
        report = ptxas_check(compile_ptx(text, arch), arch)
        assert f"Compiling entry function '{kernel.name}' for '{arch}'" in report
