"""Chunk copies: `simt.thread.block_column(k, W)` and `v[k] = x[i]` / `out[i] = v[k]`.

The simulator against NumPy (the bench's chunk row kernels, copies of f32, u16, f16 and bf16
held in local and shared arrays of those types, a 1-D array's chunk), a chunk past the row's end failing at its last lane before anything moves, the
IR (lanes W-1 .. 0 marked `vector=(j, W)`, the verifier's refusals of malformed groups, the
text form round trip) and the PTX: one `ld.global.nc.v4.b32` / `st.global.v4.b32` per chunk on
the aligned path, through ptxas. The refusals are in the compile-fail corpus (`chunk_*.py`);
tests/gpu/test_simt_chunks_gpu.py runs these kernels on the GPU, an unaligned row too.
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
from fearless.ir.core import ArrayType, Function
from fearless.ir.simt import ops
from fearless.ir.simt.parser import parse_function
from fearless.ir.simt.printer import print_function
from fearless.ir.simt.verifier import verify
from fearless_bench.kernels_simt_chunks import CHUNK_KERNELS, CHUNK_THREADS
from support.simt_chunks_kernels import copy_rows, copy_u16, scale_half

RNG = np.random.default_rng(41)
EPS = np.float32(1e-5)


@simt.kernel(block=16)
def double_bf16(x: simt.Slice[fl.bf16, 2], out: simt.DisjointSlice[fl.bf16, 2]):
    """out = 2 x in bf16 (computed in f32), through a bf16 local row and a bf16 shared slot."""
    v = simt.local.array((1, 8), fl.bf16)
    s = simt.shared.array((16,), fl.bf16)
    t = simt.thread.block_index_1d()
    i = simt.thread.block_column(0, 8)
    if i.col < x.shape[1]:
        v[0] = x[i]
        s[t] = v[0, 0]
        for j in range(8):
            v[0, j] = fl.bf16(fl.f32(v[0, j]) * 2.0)
        v[0, 0] = fl.bf16(fl.f32(s[t]) * 2.0)
        out[i] = v[0]


def test_half_types_live_in_local_and_shared_arrays() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = RNG.random((2, 128)).astype(np.float16)
    w = RNG.random(128).astype(np.float16)
    out = np.zeros_like(x)
    scale_half[2, 16](x, w, out)
    np.testing.assert_array_equal(out, x * w)
    k = np.arange(256, dtype=np.float32).reshape(2, 128)  # exact in bf16, and doubled
    xb = k.astype(ml_dtypes.bfloat16)
    outb = np.zeros_like(xb)
    double_bf16[2, 16](xb, outb)
    np.testing.assert_array_equal(outb.astype(np.float32), 2 * k)


def test_row_kernels_match_numpy() -> None:
    for cols in (1024, 200, 8):
        x = RNG.standard_normal((5, cols)).astype(np.float32)
        w = RNG.standard_normal(cols).astype(np.float32)
        b = RNG.standard_normal(cols).astype(np.float32)
        out = np.zeros_like(x)
        CHUNK_KERNELS["softmax"][5, CHUNK_THREADS](x, out)
        e = np.exp(x - x.max(1, keepdims=True))
        np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-8)
        CHUNK_KERNELS["rms_norm"][5, CHUNK_THREADS](x, w, EPS, out)
        rms = x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + EPS) * w
        np.testing.assert_allclose(out, rms, rtol=1e-4, atol=1e-5)
        CHUNK_KERNELS["layer_norm"][5, CHUNK_THREADS](x, w, b, EPS, out)
        mu = x.mean(1, keepdims=True)
        ln = (x - mu) / np.sqrt(x.var(1, keepdims=True) + EPS) * w + b
        np.testing.assert_allclose(out, ln, rtol=1e-4, atol=1e-4)


def test_copies_move_every_element_once() -> None:
    x = RNG.standard_normal((3, 100)).astype(np.float32)
    out = np.full_like(x, np.nan)
    copy_rows[3, 32](x, out)
    np.testing.assert_array_equal(out, x + 1)
    xh = RNG.integers(0, 1 << 16, (2, 128)).astype(np.uint16)
    wh = RNG.integers(0, 1 << 16, 128).astype(np.uint16)
    outh = np.zeros_like(xh)
    copy_u16[2, 16](xh, wh, outh)
    np.testing.assert_array_equal(outh, xh + wh)


def test_a_chunk_past_the_row_fails_at_its_last_lane_before_moving() -> None:
    x = RNG.standard_normal((2, 10)).astype(np.float32)  # the chunk at 8 runs to 11
    out = np.zeros_like(x)
    with pytest.raises(KernelIndexError, match="the len is 10 but the index is 11"):
        copy_rows[2, 32](x, out)


# --------------------------------------------------------------------------------- IR


def test_the_lanes_are_marked_from_the_last() -> None:
    text = copy_rows.inspect(stage="ir")
    marks = [line.split("vector=")[1][:6] for line in text.splitlines() if "vector=" in line]
    assert marks == ["(3, 4)", "(2, 4)", "(1, 4)", "(0, 4)"] * 2  # the load, then the store
    assert "ThreadIndex2D<4>" in text and "index.block_row {width=4}" in text
    fn = copy_rows.compiled_ir().fn
    again = parse_function(print_function(fn))
    verify(again)
    assert print_function(again) == print_function(fn)


def _group(lanes: list[int], interrupt: bool = False) -> Function:
    loc = Location("t.py", 1, 0)
    fn = Function("forged", loc)
    entry = fn.new_block("entry")
    x = entry.add_arg(ArrayType(dtypes.f32, False), loc, "x")
    out = entry.add_arg(ArrayType(dtypes.f32, True), loc, "out")
    e = entry.append
    c = e(ops.Constant(0, dtypes.i64, loc)).result
    cols = [c] + [
        e(ops.Binary("add", c, e(ops.Constant(j, dtypes.i64, loc)).result, loc)).result
        for j in range(1, 4)
    ]
    for n, lane in enumerate(lanes):
        v = e(ops.Load(x, [cols[lane]], loc, vector=(lane, 4))).result
        if interrupt and n == 1:
            e(ops.Store(out, [c], v, loc))
    e(ops.Return(loc))
    return fn


def test_verifier_refuses_malformed_chunk_groups() -> None:
    verify(_group([3, 2, 1, 0]))
    for lanes, interrupt, why in [
        ([0, 1, 2, 3], False, "starts at lane 0"),
        ([3, 1, 2, 0], False, "lanes are not one array's"),
        ([3, 2, 1], False, "interrupted by `return`"),
        ([3, 2, 1, 0], True, "interrupted by `store`"),
    ]:
        with pytest.raises(InternalError, match=why):
            verify(_group(lanes, interrupt))


# ------------------------------------------------------------------------------- PTX


def _ptx(kernel: simt.Kernel) -> str:
    ir = kernel.compiled_ir()
    return compile_ptx(str(lower_function(ir.fn, ir.params, ir.contract, kernel.name)), "sm_90")


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")
def test_chunks_are_vector_accesses_in_ptx() -> None:
    ptx = _ptx(copy_rows)
    assert ptx.count("ld.global.nc.v4.b32") == 2 and ptx.count("st.global.v4.b32") == 2
    assert ".local" not in ptx  # the local rows stay in registers
    half = _ptx(copy_u16)
    assert half.count("ld.global.nc.v4.b32") == 2  # x's and w's 16 bytes
    assert _ptx(scale_half).count("ld.global.nc.v4.b32") == 2  # 8 halves: 16 bytes
    for kernel in (copy_rows, copy_u16, scale_half, double_bf16, *CHUNK_KERNELS.values()):
        report = ptxas_check(_ptx(kernel), "sm_90")
        assert f"Compiling entry function '{kernel.name}'" in report


def test_block_reduce_keeps_its_last_barrier_only_in_a_loop() -> None:
    @simt.kernel
    def once(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        s = simt.block.reduce(x[i] if i < len(x) else fl.f32(0.0), "sum")
        if i < len(out):
            out[i] = s

    @simt.kernel
    def looped(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        s = fl.f32(0.0)
        for _ in range(3):
            s += simt.block.reduce(x[i] if i < len(x) else fl.f32(0.0), "sum")
        if i < len(out):
            out[i] = s

    def barriers(k: simt.Kernel) -> int:
        ir = k.compiled_ir()
        text = str(lower_function(ir.fn, ir.params, ir.contract, k.name))
        return text.count('call void @"llvm.nvvm.barrier0"')

    assert barriers(once) == 1 and barriers(looped) == 2
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    looped[2, 32](x, out)
    np.testing.assert_array_equal(out[:32], 3 * x[:32].sum())


def test_max_registers_reaches_ptx_and_the_cache_key() -> None:
    from fearless.simt.compiler import cache_key

    @simt.kernel(block=128, max_registers=32)
    def capped(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = x[i]

    assert ".maxnreg 32" in _ptx(capped)
    assert cache_key(capped.spec, "sm_90") != cache_key(copy_rows.spec, "sm_90")
    for bad in (8, 300, 32.0):
        with pytest.raises(fl.LaunchContractError, match="max_registers must be an int"):
            simt.kernel(max_registers=bad)(capped.func)  # type: ignore[arg-type]
    with pytest.raises(fl.LaunchContractError, match="has no option `blocks`"):
        simt.kernel(blocks=128)(capped.func)  # type: ignore[call-arg]


@simt.kernel(block=32)
def sixteen(x: simt.Slice[fl.f32, 2], out: simt.DisjointSlice[fl.f32, 2]):
    """16 columns a thread in a local array: LLVM's own threshold stopped short of this."""
    v = simt.local.array(16, fl.f32)
    for k in range(16):
        i = simt.thread.block_column(k)
        v[k] = x[i] if i.col < x.shape[1] else fl.f32(0.0)
    for k in range(16):
        i = simt.thread.block_column(k)
        if i.col < out.shape[1]:
            out[i] = v[15 - k] + v[k]


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")
def test_a_sixteen_step_loop_over_a_local_array_is_unrolled() -> None:
    ir = sixteen.compiled_ir()
    text = str(lower_function(ir.fn, ir.params, ir.contract, sixteen.name))
    assert "llvm.loop.unroll.full" in text
    ptx = compile_ptx(text, "sm_90")
    assert ".local" not in ptx  # the array is in registers
    x = RNG.standard_normal((2, 512)).astype(np.float32)
    out = np.zeros_like(x)
    sixteen[2, 32](x, out)
    cols = np.arange(512)
    mirror = (15 - cols // 32) * 32 + cols % 32  # thread t's step 15 - k
    np.testing.assert_array_equal(out, x + x[:, mirror])
