"""`fearless.ops.w8a8_block_fp8_matmul` (DESIGN 2c, DeepSeek-V3's block-scaled fp8 GEMM):
TileGym's semantics against the float64 NumPy reference (tests/support/fp8_block_ref.py) on
the simulator at small ragged shapes (M, N, K not multiples of the tiles, partial last scale
blocks, block_n not a multiple of the tile, block_k of 32, 48, 64, 128 and 256, leading axes,
f32 / f16 / bf16 outputs, f8e4m3fn and f8e5m2); each scale lands on its own block exactly
(powers of two on all-ones operands); the call kinds (torch, NumPy, fl.Tensor) and the
output_dtype spellings; empty products; the torch operator, its fake kernel, torch.compile
and torch's opcheck; the refusals with their messages; the kernel through tileiras."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_fp8_block import make_fp8_block_matmul
from support.fp8_block_ref import fp8_block_inputs, fp8_block_matmul_reference

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 8e-3}
E4M3, E5M2 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2


def _rel(got: Any, want: np.ndarray) -> float:
    if isinstance(got, torch.Tensor):
        got = got.double().numpy()
    got = np.asarray(got).astype(np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def _torch(x: np.ndarray) -> Any:
    """x as a CPU torch tensor (fp8 through its raw bytes: torch.from_numpy has no fp8)."""
    if x.dtype == np.float32:
        return torch.from_numpy(x)
    fp8 = torch.float8_e4m3fn if x.dtype == E4M3 else torch.float8_e5m2
    return torch.from_numpy(x.view(np.uint8)).view(fp8)


CASES = [  # lead (A's axes but K), N, K, [block_n, block_k], output_dtype, fp8
    ((37,), 45, 208, None, None, E4M3),  # defaults: [128, 128], f32; K's last block of 80
    ((33,), 70, 96, [32, 64], "bfloat16", E4M3),  # block_n < the tile: a scale per column
    ((2, 9), 50, 144, [48, 48], "float16", E4M3),  # leading axes; K steps of 16, 3 per block
    ((1,), 130, 256, [128, 256], "bfloat16", E4M3),  # M = 1; two K steps per block; N of 2
    ((20,), 24, 64, [16, 32], "float32", E5M2),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}-{c[4]}")
def test_matches_the_float64_reference(case: tuple) -> None:
    lead, n, k, block_size, dtype, fp8 = case
    bn, bk = block_size or (128, 128)
    a, b, a_s, b_s = fp8_block_inputs(lead, n, k, bn, bk, seed=k + n, fp8=fp8)
    want = fp8_block_matmul_reference(a, b, a_s, b_s, bn, bk)
    tdt = None if dtype is None else getattr(torch, dtype)
    got = ops.w8a8_block_fp8_matmul(*map(_torch, (a, b, a_s, b_s)), block_size, tdt)
    assert got.shape == (*lead, n) and got.dtype == (tdt or torch.float32)
    assert _rel(got, want) < TOL[dtype or "float32"]


def test_each_scale_multiplies_its_own_block_exactly() -> None:
    """A and B all ones, every scale a distinct power of two: any scale read for the wrong
    row, column block or K block changes C, and f32 holds the exact sums."""
    m, n, k, bn, bk = 19, 40, 96, 24, 32
    a = np.ones((m, k), E4M3)
    b = np.ones((n, k), E4M3)
    exps = np.arange(m * 3).reshape(m, 3) % 13
    a_s = (2.0**-exps).astype(np.float32)
    b_s = (2.0 ** -(np.arange(2 * 3).reshape(2, 3) + 3)).astype(np.float32)
    got = ops.w8a8_block_fp8_matmul(a, b, a_s, b_s, [bn, bk])
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    np.testing.assert_array_equal(got, fp8_block_matmul_reference(a, b, a_s, b_s, bn, bk))


def test_call_kinds_and_output_dtype_spellings() -> None:
    a, b, a_s, b_s = fp8_block_inputs((12,), 20, 32, 128, 128, seed=3)
    want = fp8_block_matmul_reference(a, b, a_s, b_s, 128, 128)
    got = ops.w8a8_block_fp8_matmul(a, b, a_s, b_s, output_dtype=ml_dtypes.bfloat16)
    assert isinstance(got, np.ndarray) and got.dtype == ml_dtypes.bfloat16
    assert _rel(got, want) < TOL["bfloat16"]
    fls = [fl.asarray(x) for x in (a, b, a_s, b_s)]
    got = ops.w8a8_block_fp8_matmul(*fls, (128, 128), fl.f16)
    assert isinstance(got, fl.Tensor) and got.dtype == fl.f16 and _rel(got.numpy(), want) < 1e-3
    got = ops.w8a8_block_fp8_matmul(a, b, a_s, b_s, output_dtype="float16")
    assert got.dtype == np.float16


def test_empty_products() -> None:
    """No rows, no columns: empty results; K = 0: zeros (a sum over nothing)."""
    a, b, a_s, b_s = (_torch(x) for x in fp8_block_inputs((0,), 8, 32, 128, 128))
    assert ops.w8a8_block_fp8_matmul(a, b, a_s, b_s).shape == (0, 8)
    a, b, a_s, b_s = (_torch(x) for x in fp8_block_inputs((3,), 0, 32, 128, 128))
    assert ops.w8a8_block_fp8_matmul(a, b, a_s, b_s).shape == (3, 0)
    a, b = torch.zeros(3, 0).to(torch.float8_e4m3fn), torch.zeros(5, 0).to(torch.float8_e4m3fn)
    got = ops.w8a8_block_fp8_matmul(a, b, torch.ones(3, 0), torch.ones(1, 0), None, torch.bfloat16)
    assert got.dtype == torch.bfloat16 and got.shape == (3, 5) and (got == 0).all()


def test_torch_operator_fake_kernel_and_compile() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    a, b, a_s, b_s = fp8_block_inputs((4, 5), 24, 64, 16, 32, seed=5)
    want = fp8_block_matmul_reference(a, b, a_s, b_s, 16, 32)
    args = [_torch(x) for x in (a, b, a_s, b_s)]
    got = torch.ops.fearless.w8a8_block_fp8_matmul(*args, [16, 32], torch.float16)
    assert got.dtype == torch.float16 and _rel(got, want) < TOL["float16"]
    with FakeTensorMode():
        fa = torch.empty(2, 7, 64, dtype=torch.float8_e4m3fn)
        fb = torch.empty(24, 64, dtype=torch.float8_e4m3fn)
        fake = torch.ops.fearless.w8a8_block_fp8_matmul(
            fa, fb, torch.empty(2, 7, 2), torch.empty(2, 2), [16, 32], torch.bfloat16
        )
        assert fake.shape == (2, 7, 24) and fake.dtype == torch.bfloat16
        fake = torch.ops.fearless.w8a8_block_fp8_matmul(
            fa, fb, torch.empty(2, 7, 1), torch.empty(1, 1)
        )
        assert fake.dtype == torch.float32

    def linear(x, w, xs, ws):  # type: ignore[no-untyped-def]
        return ops.w8a8_block_fp8_matmul(x, w, xs, ws, [16, 32], torch.bfloat16)

    got = torch.compile(linear, fullgraph=True, backend="aot_eager")(*args)
    assert got.dtype == torch.bfloat16 and _rel(got, want) < TOL["bfloat16"]


def test_torch_library_opcheck() -> None:
    """torch's checker of custom ops, but its schema test: that one compares the inputs before
    and after with `torch.allclose`, which torch has not for fp8 CPU tensors."""
    args = (
        (torch.randn(2, 5, 48) * 8).to(torch.float8_e4m3fn),
        (torch.randn(40, 48) * 8).to(torch.float8_e4m3fn),
        torch.rand(2, 5, 2) * 0.05,
        torch.rand(2, 2) * 0.05,
        [32, 32],
        torch.bfloat16,
    )
    tests = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(torch.ops.fearless.w8a8_block_fp8_matmul.default, args, test_utils=tests)


def _refused(match: str, *args: Any, **kwargs: Any) -> fl.KernelTypeError:
    with pytest.raises(fl.KernelTypeError, match=match) as e:
        ops.w8a8_block_fp8_matmul(*args, **kwargs)
    assert e.value.code == "E0701"
    return e.value


def test_refusals_are_fearless_errors() -> None:
    a, b, a_s, b_s = (_torch(x) for x in fp8_block_inputs((8,), 40, 160, 32, 64))
    ok = [32, 64]
    err = _refused(r"takes fp8 \(f8e4m3fn or f8e5m2\) A and B, but `A` is f32", a.float(), b,
                   a_s, b_s, ok)  # fmt: skip
    assert "quantize `A` to float8_e4m3fn" in str(err)
    _refused("but `B` is bf16", a, b.bfloat16(), a_s, b_s, ok)
    _refused("A and B of one fp8 dtype", a, b.to(torch.float8_e5m2), a_s, b_s, ok)
    _refused("`As` is f16", a, b, a_s.half(), b_s, ok)
    _refused(r"by B \(N, K\)\^T", a, b[0], a_s, b_s, ok)
    _refused("of one K", a, b[:, :144], a_s, b_s, ok)
    err = _refused(r"K \(A's last axis, 152\) a multiple of 16", a[:, :152], b[:, :152], a_s, b_s)
    assert "pad K to 160" in str(err)
    err = _refused(r"`As` .* must be \(8, 3\) .*ceil\(160 / 64\)\), got \(8, 2\)", a, b, a_s[:, :2],
                   b_s, ok)  # fmt: skip
    assert "check block_size" in str(err)
    _refused(r"`Bs` .* must be \(2, 3\) .*got \(1, 3\)", a, b, a_s, b_s[:1], ok)
    _refused(r"`Bs` .* must be \(1, 2\)", a, b, a_s[:, :2], b_s, [128, 128])  # block_size swapped
    _refused(r"block_size` .* must be \[block_n, block_k\], two ints, got \[64\]", a, b, a_s, b_s,
             [64])  # fmt: skip
    _refused("two ints", a, b, a_s, b_s, "64")
    _refused(r"block_k a positive multiple of 16 .*got block_size \[32, 40\]", a, b, a_s, b_s,
             [32, 40])  # fmt: skip
    _refused(r"got block_size \[0, 64\]", a, b, a_s, b_s, [0, 64])
    err = _refused("`output_dtype` .* must be float32, float16 or bfloat16, got torch.float64",
                   a, b, a_s, b_s, ok, torch.float64)  # fmt: skip
    assert "output_dtype=torch.bfloat16" in str(err)
    _refused("must be float32, float16 or bfloat16", a, b, a_s, b_s, ok, "nonsense")
    _refused("has no backward yet", a, b, a_s.requires_grad_(), b_s, ok)


@pytest.mark.parametrize(("fp8", "out"), [("f8e4m3fn", "bf16"), ("f8e5m2", "f32")])
def test_the_kernel_compiles_through_tileiras(
    cubin: Callable[..., bytes], fp8: str, out: str
) -> None:
    in_dt, out_dt = getattr(fl, fp8), getattr(fl, out)
    m, n, k = 512, 1024, 1024
    a, b = fl.zeros((m, k), dtype=in_dt), fl.zeros((n, k), dtype=in_dt)
    a_s, b_s = fl.zeros((m, k // 128)), fl.zeros((n // 128, k // 128))
    with fl.empty((m, n), dtype=out_dt).partition((128, 128)) as c:
        assert cubin(make_fp8_block_matmul(in_dt, out_dt), c, a, b, a_s, b_s, 128, 128, 1)
