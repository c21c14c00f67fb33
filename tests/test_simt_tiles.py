"""`simt.thread.tile_index_2d(k, rows)` and `block_index_2d(k)`: a tile of `rows` rows per
block, several rows per thread, all safe (the transpose of the bench moves 32 x 32 tiles with
blocks of 32 x 8 threads this way).

The simulator against NumPy (every element of a tile written once, tiles taller and shorter
than the block, partial tiles at the edges), a step past the tile failing its check, the
IR's verifier rules and the LLVM lowering: with a fixed block, `tid.*` carry their ranges, so
the shared-memory checks and the step's test fold away (PTX through ptxas). The refusals are
in the compile-fail corpus (`simt_tile_index_2d_*.py`, `block_index_2d_step_*.py`);
tests/gpu/test_simt_block_stride_gpu.py runs these kernels on the GPU against the simulator.
"""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import dtypes, simt
from fearless.backends.llvm.lower import lower_function
from fearless.backends.llvm.ptx import compile_ptx, ptxas_check
from fearless.backends.toolchain import find_ptxas
from fearless.errors import InternalError, KernelIndexError, Location
from fearless.ir.core import Function, Value
from fearless.ir.simt import ops
from fearless.ir.simt.verifier import verify
from fearless_bench.kernels_simt import TILE
from support.simt_tiles_kernels import SHORT, STEPS, owners, step_of, transpose

RNG = np.random.default_rng(37)


def test_transpose_matches_numpy() -> None:
    for shape in [(64, 96), (70, 45), (8, 33)]:  # whole tiles, partial ones, a short matrix
        x = RNG.standard_normal(shape).astype(np.float32)
        out = np.full(shape[::-1], np.nan, np.float32)
        grid = (-(-shape[0] // TILE), -(-shape[1] // TILE))
        transpose[grid, (TILE, TILE // STEPS)](x, out)
        np.testing.assert_array_equal(out, x.T)


@pytest.mark.parametrize("block_rows", [1, 2, 3, 5, 8])  # 5 rows per tile: 5, 3, 2, 1, 1 steps
def test_each_element_of_a_tile_is_written_once(block_rows: int) -> None:
    rows, cols, bx = 23, 20, 8
    out = np.zeros((rows, cols), np.int64)
    grid = (-(-cols // bx), -(-rows // SHORT))
    owners[grid, (bx, block_rows)](SHORT, out)
    local = np.arange(rows) % SHORT  # the row within its tile: step * block_rows + ty
    want = 1 + local // block_rows + 10 * (local % block_rows)
    np.testing.assert_array_equal(out, np.broadcast_to(want[:, None], (rows, cols)))


def test_a_step_past_the_tile_fails_its_check() -> None:
    out = np.zeros((10, 4), np.int64)
    step_of[(1, 2), (4, 1)](2, out)  # row 2 of each tile of 5: rows 2 and 7
    assert (out[[2, 7]] == 2).all() and (np.delete(out, [2, 7], axis=0) == 0).all()
    for k in (5, -1):  # 5 >= 5: past the tile; -1 as a huge unsigned step
        with pytest.raises(KernelIndexError, match="the len is 10") as err:
            step_of[(1, 2), (4, 1)](k, out)
        assert "a step past its block's tile" in str(err.value)


def test_a_3d_launch_is_refused() -> None:
    out = np.zeros((10, 4), np.int64)
    with pytest.raises(fl.LaunchContractError, match="needs a 2-D launch"):
        owners[(1, 2, 2), (4, 2)](1, out)


# ------------------------------------------------------------------------------ the IR


def test_the_ir_names_the_steps_and_proves_the_guarded_writes() -> None:
    text = transpose.inspect(stage="ir")
    assert "index.block_tile_row" in text and "index.tile_row" in text
    assert "2 proven by guards" in text  # out[g]'s row and column, by the `if`


def _forged(rows: int, block_y: str) -> Function:
    loc = Location("t.py", 1, 0)
    fn = Function("forged", loc)
    e = fn.new_block("entry").append

    def reg(r: str) -> Value:
        return e(ops.Cast(e(ops.SpecialReg(r, loc)).result, dtypes.i64, loc)).result  # type: ignore[no-any-return]

    zero = e(ops.Constant(0, dtypes.i64, loc)).result
    r0 = e(ops.ThreadIndexAxis(e(ops.BlockIndex2D(loc)).result, 0, loc)).result
    count = e(ops.Binary("mul", reg("ntid.y"), reg("ntid.z"), loc)).result
    local = e(ops.ThreadIndexAxis(e(ops.BlockTileRow(r0, zero, count, loc)).result, 0, loc))
    height = e(ops.Constant(rows, dtypes.i64, loc)).result
    e(ops.TileRow(local.result, height, reg(block_y), loc))
    e(ops.Return(loc))
    return fn


def test_verifier_takes_a_constant_height_and_the_blocks_row() -> None:
    verify(_forged(32, "ctaid.y"))
    for rows, reg in [(0, "ctaid.y"), (32, "ctaid.x"), (32, "tid.y")]:
        with pytest.raises(InternalError, match="operand types do not fit"):
            verify(_forged(rows, reg))


# ----------------------------------------------------------------------------- LLVM


def _llvm(kernel: simt.Kernel) -> str:
    ir = kernel.compiled_ir()
    return str(lower_function(ir.fn, ir.params, ir.contract, kernel.name))


def test_a_fixed_block_gives_tid_its_range() -> None:
    text = _llvm(transpose)  # block (32, 8, 1): tid.z is 0, tid.x and tid.y carry ranges
    assert "sreg.tid.z" not in text
    assert "!range" in text


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")
def test_transpose_has_no_shared_checks_left_in_ptx() -> None:
    ptx = compile_ptx(_llvm(transpose), "sm_90")
    # The shared tile's checks fold (tid.x < 32, row + 8k < 32), so the only branches left
    # are the kernel's own guards: four loads of x and four stores of out, no error path.
    assert "__fearless_report_oob" not in ptx and "st.global.b64" not in ptx
    assert ptx.count("ld.global.nc.b32") == STEPS and ptx.count("st.global.b32") == STEPS
    for kernel in (transpose, owners, step_of):
        report = ptxas_check(compile_ptx(_llvm(kernel), "sm_90"), "sm_90")
        assert f"Compiling entry function '{kernel.name}'" in report
