"""The 8-bit floats `fl.f8e4m3fn` and `fl.f8e5m2` (torch's and ml_dtypes' float8_e4m3fn and
float8_e5m2) on the Tile track: tensors of them, conversions in kernels, and `tile.mma` on
Hopper's fp8 tensor cores into f32; arithmetic on fp8 tiles is refused. The simulator against
ml_dtypes and NumPy, the bytecode through tileiras, and the GPU against the simulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import fearless as fl
from fearless import simt, tile

F8 = [(fl.f8e4m3fn, ml_dtypes.float8_e4m3fn), (fl.f8e5m2, ml_dtypes.float8_e5m2)]


def make_quantize(dt):  # type: ignore[no-untyped-def]
    @tile.kernel
    def quantize(q: tile.Part[dt], back: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        v = tile.load_like(x, q).astype(dt)
        q.store(v)
        back.store(v.astype(fl.f32))

    return quantize


def make_gemm(dt):  # type: ignore[no-untyped-def]
    @tile.kernel
    def gemm(c: tile.Part[fl.f32], a: tile.Tensor[dt], b: tile.Tensor[dt]):
        BM, BN = c.shape
        i, j = c.index
        acc = tile.zeros((BM, BN), fl.f32)
        for k in range(tile.cdiv(a.shape[1], 32)):
            acc = tile.mma(tile.load(a, (i, k), (BM, 32)), tile.load(b, (k, j), (32, BN)), acc)
        c.store(acc)

    return gemm


QUANTIZE = {dt: make_quantize(dt) for dt, _ in F8}
GEMM = {dt: make_gemm(dt) for dt, _ in F8}
RNG = np.random.default_rng(8)
X = (RNG.standard_normal(64) * 40).astype(np.float32)  # past e4m3fn's 448 too, now and then
X[:4] = [0.0, -0.0, 448.0, 1e-3]
A = RNG.standard_normal((32, 64)).astype(np.float32)
B = RNG.standard_normal((64, 32)).astype(np.float32)


@pytest.mark.parametrize(("dt", "ml"), F8, ids=lambda v: getattr(v, "name", ""))
def test_tensors_of_8_bit_floats(dt: fl.DType, ml: type) -> None:
    values = np.array([0.5, -1.75, 3.0, 224.0], ml)
    t = fl.asarray(values)
    assert t.dtype is dt and t.numpy().dtype == np.dtype(ml)
    assert t.numpy().astype(np.float32).tolist() == [0.5, -1.75, 3.0, 224.0]
    z = fl.zeros(3, dtype=dt)
    assert z.numpy().astype(np.float32).tolist() == [0.0, 0.0, 0.0]
    assert fl.full(2, 1.5, dtype=dt).numpy().astype(np.float32).tolist() == [1.5, 1.5]


@pytest.mark.parametrize(("dt", "ml"), F8, ids=lambda v: getattr(v, "name", ""))
def test_conversions_round_as_ml_dtypes(dt: fl.DType, ml: type) -> None:
    q = fl.empty(64, dtype=dt).partition((64,))
    back = fl.empty(64).partition((64,))
    QUANTIZE[dt](q, back, fl.asarray(X))
    want = X.astype(ml)
    got = q.unpartition().numpy()
    assert got.view(np.uint8).tolist() == want.view(np.uint8).tolist()
    np.testing.assert_array_equal(back.unpartition().numpy(), want.astype(np.float32))


@pytest.mark.parametrize(
    ("dt", "ml", "top"), [(*F8[0], 448.0), (*F8[1], 57344.0)], ids=["e4m3fn", "e5m2"]
)
def test_conversions_past_the_largest_value_saturate_as_the_gpu_does(
    dt: fl.DType, ml: type, top: float
) -> None:
    """Past the largest finite value (infinity too) `.astype` gives that value with its sign,
    as PTX's cvt.rn.satfinite (the GPU's only rounding to an 8-bit float; its tests run this
    same kernel), not ml_dtypes' NaN or inf; NaN stays NaN."""
    x = np.zeros(64, np.float32)
    x[:6] = [1e6, -1e6, np.inf, -np.inf, np.nan, top * 1.02]
    q = fl.empty(64, dtype=dt).partition((64,))
    back = fl.empty(64).partition((64,))
    QUANTIZE[dt](q, back, fl.asarray(x))
    got = back.unpartition().numpy()
    assert got[:4].tolist() == [top, -top, top, -top] and np.isnan(got[4]) and got[5] == top
    assert q.unpartition().numpy()[:6].astype(np.float32)[[0, 1, 5]].tolist() == [top, -top, top]


def make_bits(dt):  # type: ignore[no-untyped-def]
    @tile.kernel
    def bits(w: tile.Part[fl.u8], again: tile.Part[dt], x: tile.Tensor[fl.f32]):
        word = tile.bitcast(tile.load_like(x, w).astype(dt), fl.u8)
        w.store(word)
        again.store(tile.bitcast(word, dt))

    return bits


@pytest.mark.parametrize(("dt", "ml"), F8, ids=lambda v: getattr(v, "name", ""))
def test_bitcast_gives_an_8_bit_floats_byte_and_back(dt: fl.DType, ml: type) -> None:
    """One byte an element (the simulator once viewed the f32 it computes with: four)."""
    w = fl.empty(64, dtype=fl.u8).partition((64,))
    again = fl.empty(64, dtype=dt).partition((64,))
    make_bits(dt)(w, again, fl.asarray(X))
    want = X.astype(ml).view(np.uint8).tolist()
    assert w.unpartition().numpy().tolist() == want
    assert again.unpartition().numpy().view(np.uint8).tolist() == want


@pytest.mark.parametrize(("dt", "ml"), F8, ids=lambda v: getattr(v, "name", ""))
def test_fp8_mma_sums_in_f32(dt: fl.DType, ml: type) -> None:
    a, b = A.astype(ml), B.astype(ml)
    c = fl.empty((32, 32)).partition((16, 16))
    GEMM[dt](c, fl.asarray(a), fl.asarray(b))
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.unpartition().numpy(), want, rtol=1e-5, atol=1e-5)


def test_fp8_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    for dt, ml in F8:
        q, back = fl.empty(64, dtype=dt).partition((64,)), fl.empty(64).partition((64,))
        assert cubin(QUANTIZE[dt], q, back, fl.asarray(X))
        c = fl.empty((32, 32)).partition((16, 16))
        assert cubin(GEMM[dt], c, fl.asarray(A.astype(ml)), fl.asarray(B.astype(ml)))


def test_arithmetic_on_fp8_tiles_is_refused() -> None:
    @tile.kernel
    def add_one(out: tile.Part[fl.f8e4m3fn], x: tile.Tensor[fl.f8e4m3fn]):
        out.store(tile.load_like(x, out) + 1.0)  # here: add

    with pytest.raises(fl.KernelTypeError, match="f8e4m3fn tiles load, store, convert") as info:
        add_one(fl.empty(16, dtype=fl.f8e4m3fn).partition((16,)), fl.zeros(16, dtype=fl.f8e4m3fn))
    assert "astype(fl.f32)" in str(info.value)


def test_simt_kernels_have_no_fp8() -> None:
    @simt.kernel
    def copy(x: simt.Slice[fl.f8e4m3fn], out: simt.DisjointSlice[fl.f8e4m3fn]):
        i = simt.thread.index_1d()
        out[i] = x[i]

    x = fl.zeros(32, dtype=fl.f8e4m3fn)
    with pytest.raises(fl.CompileError, match="SIMT kernels have no f8e4m3fn"):
        copy[1, 32](x, fl.empty(32, dtype=fl.f8e4m3fn))


@pytest.mark.gpu
def test_gpu_fp8_conversions_and_mma_match_the_simulator(sim_and_gpu: Callable[..., Any]) -> None:
    x = X.copy()
    x[:6] = [1e6, -1e6, np.inf, -np.inf, 2.5, 460.0]  # past both types' largest values

    def run() -> list[np.ndarray]:
        outs = []
        for dt, ml in F8:
            q, back = fl.empty(64, dtype=dt).partition((64,)), fl.empty(64).partition((64,))
            QUANTIZE[dt](q, back, fl.asarray(x))
            c = fl.empty((32, 32)).partition((16, 16))
            GEMM[dt](c, fl.asarray(A.astype(ml)), fl.asarray(B.astype(ml)))
            outs += [q.unpartition().numpy().view(np.uint8), back.unpartition().numpy()]
            outs.append(c.unpartition().numpy())
        return outs

    sims, gpus = sim_and_gpu(run)
    for i, (gpu, sim) in enumerate(zip(gpus, sims, strict=True)):
        if i % 3 == 2:  # the GEMM: f32 sums in another order
            np.testing.assert_allclose(gpu, sim, rtol=1e-5, atol=1e-5)
        else:  # conversions: the same bits (saturated past the largest value)
            assert np.array_equal(gpu.view(np.uint8), sim.view(np.uint8)), i


def test_torch_fp8_tensors_are_arguments() -> None:
    torch = pytest.importorskip("torch")
    t = torch.tensor([0.5, 1.5, -2.0, 3.0]).to(torch.float8_e5m2)
    assert fl.asarray(t).dtype is fl.f8e5m2

    @tile.kernel
    def widen(out: tile.Part[fl.f32], x: tile.Tensor[fl.f8e5m2]):
        out.store(tile.load_like(x, out).astype(fl.f32))

    out = fl.empty(4).partition((4,))
    widen(out, t)
    assert out.unpartition().numpy().tolist() == [0.5, 1.5, -2.0, 3.0]


def test_an_fp8_scalar_parameter_is_refused() -> None:
    @tile.kernel
    def scaled(out: tile.Part[fl.f32], s: fl.f8e4m3fn):
        out.store(tile.zeros((4,), fl.f32))

    with pytest.raises(fl.CompileError, match="a f8e4m3fn scalar is not a kernel parameter"):
        scaled(fl.empty(4).partition((4,)), 1.0)


def test_ops_matmul_of_fp8_returns_fp8() -> None:
    """`fearless.ops.matmul` of fp8 operands (TileGym's fp8 grid): f32 sums, one rounding to
    the operands' dtype, for fl.Tensors and torch tensors."""
    from fearless import ops

    a, b = A[:, :48].astype(ml_dtypes.float8_e4m3fn), B[:48, :40].astype(ml_dtypes.float8_e4m3fn)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    c = ops.matmul(fl.asarray(a), fl.asarray(b))
    assert c.dtype is fl.f8e4m3fn
    assert (
        c.numpy().view(np.uint8).tolist()
        == want.astype(ml_dtypes.float8_e4m3fn).view(np.uint8).tolist()
    )
    torch = pytest.importorskip("torch")
    ta = torch.from_numpy(a.astype(np.float32)).to(torch.float8_e4m3fn)
    tb = torch.from_numpy(b.astype(np.float32)).to(torch.float8_e4m3fn)
    tc = ops.matmul(ta, tb)
    assert tc.dtype == torch.float8_e4m3fn
    assert (
        tc.float().numpy().tolist()
        == want.astype(ml_dtypes.float8_e4m3fn).astype(np.float32).tolist()
    )


def test_ops_bmm_and_group_gemm_of_fp8() -> None:
    from fearless import ops

    a = np.stack([A[:, :32], A[:, 32:]]).astype(ml_dtypes.float8_e5m2)  # (2, 32, 32)
    b = np.stack([B[:32], B[32:]]).astype(ml_dtypes.float8_e5m2)
    want = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    got = ops.bmm(fl.asarray(a), fl.asarray(b))
    assert got.dtype is fl.f8e5m2
    np.testing.assert_allclose(got.numpy().astype(np.float64), want, rtol=0.13, atol=0.02)
    outs = ops.group_gemm(
        [fl.asarray(a[0]), fl.asarray(a[1])], [fl.asarray(b[0]), fl.asarray(b[1])]
    )
    for out, w in zip(outs, want, strict=True):
        assert out.dtype is fl.f8e5m2
        np.testing.assert_allclose(out.numpy().astype(np.float64), w, rtol=0.13, atol=0.02)


@tile.kernel
def tf32_gemm(c: tile.Part[fl.f32], a: tile.Tensor[fl.f32], b: tile.Tensor[fl.f32]):
    """cuTile's f32 GEMM on the tensor cores: `astype(ct.tfloat32)` before each mma."""
    BM, BN = c.shape
    i, j = c.index
    acc = tile.zeros((BM, BN), fl.f32)
    for k in range(tile.cdiv(a.shape[1], 32)):
        ta = tile.load(a, (i, k), (BM, 32)).astype(fl.tf32)
        acc = tile.mma(ta, tile.load(b, (k, j), (32, BN)).astype(fl.tf32), acc)
    c.store(acc)


def _tf32(x: np.ndarray) -> np.ndarray:
    """float32 rounded to tf32's 10-bit mantissa, ties away from zero (cvt.rna.tf32.f32)."""
    u = x.view(np.uint32)
    return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def test_tf32_mma_rounds_its_inputs_and_sums_in_f32() -> None:
    a, b = A[:, :96].copy(), B[:96].copy()
    c = fl.empty((32, 32)).partition((16, 16))
    tf32_gemm(c, fl.asarray(a), fl.asarray(b))
    got = c.unpartition().numpy()
    want = _tf32(a).astype(np.float64) @ _tf32(b).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.abs(got - a.astype(np.float64) @ b).max() > 1e-4  # not the f32 product


def test_tf32_compiles_and_is_a_tile_type_only(cubin: Callable[..., bytes]) -> None:
    c = fl.empty((32, 32)).partition((16, 16))
    assert cubin(tf32_gemm, c, fl.asarray(A[:, :96].copy()), fl.asarray(B[:96].copy()))
    with pytest.raises(fl.KernelTypeError, match="tf32 is a tile type"):
        fl.empty(4, dtype=fl.tf32)

    @tile.kernel
    def add_one(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        out.store((tile.load_like(x, out).astype(fl.tf32) + 1.0).astype(fl.f32))

    with pytest.raises(fl.KernelTypeError, match=r"tf32 tiles convert and feed `tile\.mma`"):
        add_one(fl.empty(8).partition((8,)), fl.zeros(8))

    @tile.kernel
    def tf32_tensor(out: tile.Part[fl.f32], x: tile.Tensor[fl.tf32]):
        out.store(tile.zeros((8,), fl.f32))

    with pytest.raises(fl.CompileError, match="a tf32 tensor is not a kernel parameter"):
        tf32_tensor(fl.empty(8).partition((8,)), fl.zeros(8))


@pytest.mark.gpu
def test_gpu_tf32_mma_matches_the_simulator(sim_and_gpu: Callable[..., Any]) -> None:
    a, b = A[:, :96].copy(), B[:96].copy()

    def run() -> np.ndarray:
        c = fl.empty((32, 32)).partition((16, 16))
        tf32_gemm(c, fl.asarray(a), fl.asarray(b))
        return c.unpartition().numpy()

    sim, gpu = sim_and_gpu(run)
    np.testing.assert_allclose(gpu, sim, rtol=1e-5, atol=1e-5)
