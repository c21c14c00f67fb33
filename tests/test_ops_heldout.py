"""Held-out checks of every fearless.ops operator against torch, on the simulator.

Shapes, dtypes, input distributions and tolerances are TileGym's own (NVIDIA/TileGym,
tests/ops/test_*.py; each case names its file), the smallest one to three of each file so that
the simulator stays fast, plus what a torch user hits: non-power-of-two rows, 3-D inputs,
`dim=`, weight=None / bias=None, non-contiguous views, requires_grad inputs, mixed dtypes and
shapes, and the kind of tensor returned. The references are torch's, computed in f32 and
rounded to the operand dtype (what torch's CUDA kernels do for half inputs). Tolerances are
compared as `torch.testing.assert_close` does (|got - want| <= atol + rtol * |want|), which is
the test of TileGym's `compare_tensors`. A case that fails is marked `xfail(strict=True)` with
a one-line diagnosis.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config, ops
from fearless.ops import kernels_gemm, kernels_rows

torch = pytest.importorskip("torch")
F = torch.nn.functional

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
# TileGym's defaults where a test file gives none (tests/common.py, get_dtype_tolerances)
DEFAULT_TOL = {f32: (1e-5, 1e-8), f16: (1e-2, 1e-2), bf16: (1e-2, 2e-2)}


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")
    # The first configuration: tuning every shape would cost seconds each on the simulator;
    # test_every_tuner_configuration_agrees runs the others.
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")


def _gen(seed: int = 0) -> Any:
    return torch.Generator().manual_seed(seed)


def _rand(*shape: int, dtype: Any = f32, seed: int = 0) -> Any:
    return torch.rand(shape, generator=_gen(seed)).to(dtype)


def _randn(*shape: int, dtype: Any = f32, seed: int = 0) -> Any:
    return torch.randn(shape, generator=_gen(seed)).to(dtype)


def _close(
    got: Any, want: Any, rtol: float, atol: float, equal_nan: bool = False, like: Any = None
) -> None:
    """TileGym's compare_tensors: same shape, dtype, device and strides (contiguous, or those
    of `like`), then allclose."""
    assert isinstance(got, torch.Tensor), type(got)
    assert got.shape == want.shape and got.dtype == want.dtype and got.device == want.device
    assert got.stride() == (want.contiguous() if like is None else like).stride()
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=equal_nan)


def _fearless_error(call: Callable[[], Any], match: str) -> fl.KernelTypeError:
    """`call()` raises fearless's own E0701 diagnostic, pointing at this file (the caller's
    line), not a Python error from inside fearless."""
    with pytest.raises(fl.KernelTypeError, match=match) as info:
        call()
    assert info.value.code == "E0701"
    assert info.value.loc is not None and info.value.loc.file == __file__
    return info.value


# ================================================================================= softmax
# tests/ops/test_softmax.py: x = torch.rand(m, n); f16 rtol 1e-3, atol 1e-5; f32 1e-5, 1e-7.
# It has no bf16 case: ours uses TileGym's default bf16 tolerance.
SOFTMAX_TOL = {f32: (1e-5, 1e-7), f16: (1e-3, 1e-5), bf16: DEFAULT_TOL[bf16]}


def _softmax_ref(x: Any, dim: int = -1) -> Any:
    return F.softmax(x.float(), dim).to(x.dtype)


@pytest.mark.parametrize(
    ("m", "n", "dtype"),
    [
        (256, 256, f32),
        (256, 9, f32),  # non-power-of-two
        (256, 1009, f16),  # non-power-of-two (prime)
        (256, 256, f16),
        (256, 1024 * 32, f32),  # TileGym's longest row
        (256, 256, bf16),  # not in TileGym
    ],
)
def test_softmax(m: int, n: int, dtype: Any) -> None:
    x = _rand(m, n, dtype=dtype)
    x0 = x.clone()
    _close(ops.softmax(x), _softmax_ref(x), *SOFTMAX_TOL[dtype])
    assert torch.equal(x, x0)  # the input is untouched


def test_softmax_3d_and_dim_naming_the_last_axis() -> None:
    x = _randn(4, 7, 1009, dtype=f16)
    for dim in (-1, 2):
        _close(ops.softmax(x, dim=dim), _softmax_ref(x), *SOFTMAX_TOL[f16])
    v = _randn(1009)
    _close(ops.softmax(v), _softmax_ref(v), *SOFTMAX_TOL[f32])
    _close(ops.softmax(v, 0), _softmax_ref(v), *SOFTMAX_TOL[f32])


def test_softmax_over_another_axis_is_a_clear_error() -> None:
    x = _randn(4, 7, 33)
    for dim in (0, 1, -2):
        _fearless_error(lambda dim=dim: ops.softmax(x, dim=dim), "works over the last axis")


def test_softmax_takes_torchs_dtype_keyword() -> None:
    x = _rand(8, 64, dtype=f16)
    got = ops.softmax(x, -1, dtype=f32)
    assert got.dtype == f32
    _close(got, F.softmax(x, -1, dtype=f32), *SOFTMAX_TOL[f32])
    xn = x.numpy()
    got_np = ops.softmax(xn, -1, dtype=fl.f32)
    assert got_np.dtype == np.float32
    np.testing.assert_allclose(got_np, got.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "view",
    ["transposed", "sliced columns", "storage offset", "stepped", "expanded", "flipped"],
)
def test_softmax_of_non_contiguous_views(view: str) -> None:
    base = _randn(300, 260)
    x = {
        "transposed": base.T,
        "sliced columns": base[:, 3:203],
        "storage offset": base[5:],
        "stepped": base[:, ::2],
        "expanded": base[:1].expand(64, 260),
        "flipped": base.flip(1),
    }[view]
    got = ops.softmax(x)
    _close(got, _softmax_ref(x.contiguous()), *SOFTMAX_TOL[f32])
    assert got.is_contiguous()


def test_softmax_masked_and_large_logits() -> None:
    x = _randn(16, 300) * 1e4  # needs the max subtracted
    x[:, 150:] = -math.inf  # an attention mask
    _close(ops.softmax(x), F.softmax(x, -1), *SOFTMAX_TOL[f32])
    x[3] = -math.inf  # a row masked entirely: NaN, as torch
    _close(ops.softmax(x), F.softmax(x, -1), *SOFTMAX_TOL[f32], equal_nan=True)


# ================================================================================= rms_norm
# tests/ops/test_rms_norm.py: x = rand * 0.5 - 2.3, weight randn, eps 1e-5, rtol 0, atol 5e-2,
# against Hugging Face's reference (variance in f32, cast to the weight's dtype before * w).
RMS_TOL = (0.0, 5e-2)


def _rms_ref(x: Any, weight: Any, eps: float) -> Any:
    var = x.to(f32).pow(2).mean(-1, keepdim=True)
    y = x * torch.rsqrt(var + eps)
    if weight is None:
        return y.to(x.dtype)
    if weight.dtype in (f16, bf16):
        y = y.to(weight.dtype)
    return (weight * y).to(x.dtype)


@pytest.mark.parametrize(
    ("m", "n", "dtype"),
    [
        (256, 256, f16),
        (256, 768, f16),  # non-power-of-two
        (256, 18432, f16),  # non-power-of-two, long
        (1024, 2**8, bf16),  # TileGym's 4096 rows: 1.8 s on the simulator
        (256, 256, f32),
    ],
)
def test_rms_norm(m: int, n: int, dtype: Any) -> None:
    x = _rand(m, n, dtype=dtype) * 0.5 - 2.3
    w = _randn(n, dtype=dtype, seed=1)
    _close(ops.rms_norm(x, (n,), w, 1e-5), _rms_ref(x, w, 1e-5), *RMS_TOL)


@pytest.mark.parametrize("dtype", [f32, f16, bf16])
def test_rms_norm_without_weight_or_eps_3d(dtype: Any) -> None:
    x = _randn(2, 3, 768, dtype=dtype)
    # eps None: the dtype's machine epsilon, as torch
    want = F.rms_norm(x.float(), (768,), eps=torch.finfo(dtype).eps).to(dtype)
    _close(ops.rms_norm(x, 768), want, *RMS_TOL)
    _close(ops.rms_norm(x, [768], None, None), want, *RMS_TOL)
    _close(ops.rms_norm(x, x.shape[-1:]), want, *RMS_TOL)


def test_rms_norm_of_a_transposed_input_and_a_strided_weight() -> None:
    x = _rand(768, 64, dtype=f16) * 0.5 - 2.3
    w = _randn(2 * 768, dtype=f16, seed=1)[::2]
    _close(ops.rms_norm(x.T, 768, w, 1e-5), _rms_ref(x.T, w, 1e-5), *RMS_TOL)


def test_rms_norm_bf16_input_with_f32_weight_as_torch() -> None:
    x = _randn(64, 768, dtype=bf16)
    w = _randn(768, seed=1)
    with warnings.catch_warnings():  # torch: "Mismatch dtype between input and weight"
        warnings.simplefilter("ignore")
        want = F.rms_norm(x, (768,), w, 1e-5)
    # fearless rounds the f32 weight to bf16 before multiplying (_io.param), torch does not:
    # one bf16 ulp apart at |y| ~ 9, over TileGym's atol 5e-2, so its default bf16 tolerance
    _close(ops.rms_norm(x, 768, w, 1e-5), want, *DEFAULT_TOL[bf16])


# =============================================================================== layer_norm
# tests/ops/test_layer_norm_legacy.py (Test_LayerNorm): x = rand * 0.5 - 2.3, weight randn
# (+ weight_shift), bias rand, eps 1e-5, rtol 0, atol 1e-2 for the output and the gradients
# (dy = 0.1 * randn). Test_PersistentLayerNorm: bf16 randn x, w, b, eps 1e-6, atol = rtol = 1e-2.
LN_TOL = (0.0, 1e-2)


def _ln_ref(x: Any, w: Any, b: Any, eps: float) -> Any:
    n = x.shape[-1]
    wf = None if w is None else w.float()
    bf = None if b is None else b.float()
    return F.layer_norm(x.float(), (n,), wf, bf, eps).to(x.dtype)


@pytest.mark.parametrize(
    ("m", "n", "shift", "dtype"),
    [(256, 256, 0.0, f16), (256, 256, 0.0, f32), (256, 256, 1.0, f16), (9, 9, 0.0, f16)],
)
def test_layer_norm(m: int, n: int, shift: float, dtype: Any) -> None:
    x = _rand(m, n, dtype=dtype) * 0.5 - 2.3
    w = _randn(n, dtype=dtype, seed=1) + shift
    b = _rand(n, dtype=dtype, seed=2)
    _close(ops.layer_norm(x, (n,), w, b, 1e-5), _ln_ref(x, w, b, 1e-5), *LN_TOL)


def test_layer_norm_bf16_persistent_shape() -> None:
    x, w = _randn(256, 256, dtype=bf16), _randn(256, dtype=bf16, seed=1)
    b = _randn(256, dtype=bf16, seed=2)
    _close(ops.layer_norm(x, (256,), w, b, 1e-6), _ln_ref(x, w, b, 1e-6), 1e-2, 1e-2)


@pytest.mark.parametrize("dtype", [f32, f16, bf16])
def test_layer_norm_weight_and_bias_none_3d(dtype: Any) -> None:
    x = _randn(3, 5, 1000, dtype=dtype)
    w, b = _randn(1000, dtype=dtype, seed=1), _randn(1000, dtype=dtype, seed=2)
    tol = LN_TOL if dtype != bf16 else (1e-2, 1e-2)
    for wi, bi in ((None, None), (w, None), (None, b)):
        _close(ops.layer_norm(x, 1000, wi, bi), _ln_ref(x, wi, bi, 1e-5), *tol)


def test_layer_norm_of_a_large_offset_and_a_sliced_input() -> None:
    x = _randn(64, 1000) + 300.0  # the mean dwarfs the spread: a one-pass variance would fail
    want = F.layer_norm(x.double(), (1000,)).float()
    _close(ops.layer_norm(x, 1000), want, 1e-4, 1e-4)
    _close(ops.layer_norm(x[:, 100:900], 800), F.layer_norm(x[:, 100:900], (800,)), 1e-4, 1e-4)


# ================================================================================ matmul
# tests/ops/test_matmul.py: a, b = torch.rand, atol = rtol = 1e-2; test_op's bf16 shapes (M, N,
# K), and test_perf's f16/f32 ones (64 and 256 cubed; it checks them with the same tolerances).
# (1024, 1024, 1023) is skipped by TileGym ("result mismatch when cannot divide BLOCK"): ours
# runs it.
def _mm_ref(a: Any, b: Any) -> Any:
    return (a.float() @ b.float()).to(a.dtype)


@pytest.mark.parametrize(
    ("m", "n", "k", "dtype"),
    [
        (8, 8, 8, bf16),
        (1024, 1024, 1023, bf16),
        (64, 64, 64, f16),
        (256, 256, 256, f32),
    ],
)
def test_matmul(m: int, n: int, k: int, dtype: Any) -> None:
    a, b = _rand(m, k, dtype=dtype), _rand(k, n, dtype=dtype, seed=1)
    _close(ops.matmul(a, b), _mm_ref(a, b), 1e-2, 1e-2)


def test_matmul_of_transposed_and_offset_operands() -> None:
    """TileGym's trans_a / trans_b (a (K, M) matrix's .t()) and offset_a / offset_b (a matrix
    starting some elements into its buffer), as torch views rather than copies."""
    m, n, k = 200, 72, 130
    at = _rand(k, m, dtype=bf16)
    bt = _rand(n, k, dtype=bf16, seed=1)
    _close(ops.matmul(at.t(), bt.t()), _mm_ref(at.t(), bt.t()), 1e-2, 1e-2)
    buf_a, buf_b = _rand(m * k + 3, dtype=f16, seed=2), _rand(k * n + 5, dtype=f16, seed=3)
    a, b = buf_a[3:].view(m, k), buf_b[5:].view(k, n)
    _close(ops.matmul(a, b), _mm_ref(a, b), 1e-2, 1e-2)


# =================================================================================== bmm
# tests/ops/test_bmm.py: batch 4, f16, torch.rand, rtol 1e-3, atol 1e-8; transpose_a / b give
# a (B, K, M) / (B, N, K) tensor transposed(1, 2): views here. TileGym tests f16 only; f32 and
# bf16 use its default tolerances.
@pytest.mark.parametrize(
    ("b", "m", "n", "k", "trans_a", "trans_b", "dtype"),
    [
        (4, 128, 256, 511, False, False, f16),
        (4, 128, 256, 512, False, False, f16),
        (4, 128, 256, 511, True, True, f16),
        (4, 128, 256, 511, False, False, bf16),
        (4, 128, 256, 511, False, False, f32),
    ],
)
def test_bmm(b: int, m: int, n: int, k: int, trans_a: bool, trans_b: bool, dtype: Any) -> None:
    x = _rand(b, k, m, dtype=dtype).transpose(1, 2) if trans_a else _rand(b, m, k, dtype=dtype)
    y = _rand(b, n, k, dtype=dtype, seed=1).transpose(1, 2) if trans_b else None
    y = y if y is not None else _rand(b, k, n, dtype=dtype, seed=1)
    rtol, atol = (1e-3, 1e-8) if dtype == f16 else DEFAULT_TOL[dtype]
    want = torch.bmm(x.float(), y.float()).to(dtype)
    _close(ops.bmm(x, y), want, rtol, atol)


# ============================================================================ group_gemm
# tests/ops/test_group_gemm.py: f16 torch.rand, reference in f32 cast back, rtol 1e-3, atol
# 1e-8; transpose_b passes B as (N, K): here its .t() view.
@pytest.mark.parametrize(
    ("ms", "ns", "ks", "trans_b"),
    [
        ([256] * 4, [128] * 4, [128] * 4, False),
        ([256] * 4, [128] * 4, [128] * 4, True),
        ([256] * 4, [128] * 4, [1024, 512, 256, 128], False),
    ],
)
def test_group_gemm(ms: list[int], ns: list[int], ks: list[int], trans_b: bool) -> None:
    As = [_rand(m, k, dtype=f16, seed=i) for i, (m, k) in enumerate(zip(ms, ks, strict=True))]
    Bs = [
        _rand(n, k, dtype=f16, seed=10 + i).t() if trans_b else _rand(k, n, dtype=f16, seed=10 + i)
        for i, (n, k) in enumerate(zip(ns, ks, strict=True))
    ]
    got = ops.group_gemm(As, Bs)
    assert isinstance(got, list) and len(got) == len(As)
    for g, a, b in zip(got, As, Bs, strict=True):
        _close(g, _mm_ref(a, b), 1e-3, 1e-8)


# ============================================================================ activations
# tests/ops/activation/test_relu.py: rand - 0.5, rtol 1e-5, atol 1e-8.
@pytest.mark.parametrize(
    ("m", "n", "dtype"), [(256, 64, f16), (256, 256, f16), (256, 2048, f32), (256, 64, bf16)]
)
def test_relu(m: int, n: int, dtype: Any) -> None:
    x = _rand(m, n, dtype=dtype) - 0.5
    _close(ops.relu(x), F.relu(x), 1e-5, 1e-8)


def test_relu_keeps_nan_and_inf_as_torch() -> None:
    x = _randn(4, 100)
    x[0, 3], x[1, 5], x[2, 7] = math.nan, math.inf, -math.inf
    _close(ops.relu(x), F.relu(x), 0.0, 0.0, equal_nan=True)


# tests/ops/activation/test_gelu.py: (256, 2048), rand * 0.5 - 2.3, rtol 0, atol 1e-2. Their
# inputs lie in [-2.3, -1.8]; ours adds a wide range (randn * 4) at f32's tighter tolerance.
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [f32, f16, bf16])
def test_gelu(approximate: str, dtype: Any) -> None:
    x = _rand(256, 2048, dtype=dtype) * 0.5 - 2.3
    want = F.gelu(x.float(), approximate=approximate).to(dtype)
    _close(ops.gelu(x, approximate=approximate), want, 0.0, 1e-2)
    if dtype == f32:
        w = _randn(3, 1000) * 4
        _close(ops.gelu(w, approximate), F.gelu(w, approximate=approximate), 1e-5, 1e-6)


# tests/ops/activation/test_geglu.py: rand * 1.2 + 0.6, rtol = atol = 1e-2, a * gelu(b) of the
# halves along `dim`. fearless splits the last axis only: other dims must be a clear error.
def _geglu_ref(x: Any, dim: int, approximate: str) -> Any:
    a, b = torch.split(x.float(), x.shape[dim] // 2, dim)
    return (a * F.gelu(b, approximate=approximate)).to(x.dtype)


GEGLU_LAST = [
    ((4,), 0),
    ((16, 4), 1),
    ((64, 16, 4), 2),
    ((64, 16, 4), -1),
    # TileGym's (256, 64, 16, 4): 262144 rows of 4 take 14 s on the simulator; 4 x 64 x 16 here
    ((4, 64, 16, 4), 3),
]


@pytest.mark.parametrize(("shape", "dim"), GEGLU_LAST)
@pytest.mark.parametrize("dtype", [f32, f16])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_geglu(shape: tuple[int, ...], dim: int, dtype: Any, approximate: str) -> None:
    x = _rand(*shape, dtype=dtype) * 1.2 + 0.6
    got = ops.geglu(x, dim=dim, approximate=approximate)
    _close(got, _geglu_ref(x, dim, approximate), 1e-2, 1e-2)


def test_geglu_bf16_wide_hidden() -> None:
    x = _randn(8, 3000, dtype=bf16)  # a half of 1500: not a power of two
    _close(ops.geglu(x), _geglu_ref(x, -1, "none"), *DEFAULT_TOL[bf16])


# TileGym's other axes (test_geglu.py: dim 0, 1, 2 of (16, 4), (64, 16, 4), (256, 64, 16, 4),
# the last at 4 x 64 x 16 x 4), as torch's glu splits any axis; the backward through autograd
GEGLU_OTHER = [((16, 4), 0), ((64, 16, 4), 0), ((64, 16, 4), 1), ((4, 64, 16, 4), 1)]
GEGLU_OTHER += [((4, 64, 16, 4), -3), ((4, 64, 16, 4), 2), ((6, 1, 3), 0)]


@pytest.mark.parametrize(("shape", "dim"), GEGLU_OTHER)
@pytest.mark.parametrize("dtype", [f32, f16])
def test_geglu_over_another_axis(shape: tuple[int, ...], dim: int, dtype: Any) -> None:
    x = (_rand(*shape, dtype=dtype) * 1.2 + 0.6).requires_grad_()
    got = ops.geglu(x, dim=dim, approximate="tanh")
    want_x = x.detach().float().requires_grad_()
    want = _geglu_ref(want_x, dim, "tanh")
    _close(got, want.to(dtype), 1e-2, 1e-2)
    dy = _randn(*got.shape, seed=1).to(dtype)
    got.backward(dy)
    want.backward(dy.float())
    _close(x.grad, want_x.grad.to(dtype), 2e-2, 2e-2)


@pytest.mark.parametrize(("shape", "dim"), [((4, 6), 2), ((4, 6), -3), ((5, 6), 0), ((), 0)])
def test_geglu_axis_errors(shape: tuple[int, ...], dim: int) -> None:
    x = _rand(*shape)
    want = "two halves, but it has 5" if shape == (5, 6) else "has no axis"
    _fearless_error(lambda: ops.geglu(x, dim=dim), want)


# tests/ops/test_silu_and_mul.py: x = randn(batch, seq, 2 * hidden), rtol 0, atol 1e-2, the
# gradients too (dy = 0.1 * randn).
def _silu_and_mul_ref(x: Any) -> Any:
    h = x.shape[-1] // 2
    xf = x.float()
    return (F.silu(xf[..., :h]) * xf[..., h:]).to(x.dtype)


@pytest.mark.parametrize(
    ("batch", "seq", "hidden", "dtype"),
    [
        (8, 512, 512, f16),
        (8, 100, 512, f32),  # odd sequence
        # TileGym's irregular hidden sizes (8, 256, 1000), (7, 100, 1000) with a batch of 2
        (2, 100, 1000, f32),
        (2, 100, 1000, bf16),  # not in TileGym
    ],
)
def test_silu_and_mul(batch: int, seq: int, hidden: int, dtype: Any) -> None:
    x = _randn(batch, seq, 2 * hidden, dtype=dtype)
    tol = (0.0, 1e-2) if dtype != bf16 else DEFAULT_TOL[bf16]
    _close(ops.silu_and_mul(x), _silu_and_mul_ref(x), *tol)


# tests/ops/test_swiglu.py: a, b = randn (f32; f16 in the backward test), rtol = atol = 1e-2.
@pytest.mark.parametrize(
    ("batch", "seq", "hidden", "dtype"),
    [(2, 512, 1024, f32), (7, 100, 1000, f32), (8, 100, 512, f16), (8, 100, 512, bf16)],
)
def test_swiglu(batch: int, seq: int, hidden: int, dtype: Any) -> None:
    a, b = _randn(batch, seq, hidden, dtype=dtype), _randn(batch, seq, hidden, dtype=dtype, seed=1)
    want = (F.silu(a.float()) * b.float()).to(dtype)
    _close(ops.swiglu(a, b), want, 1e-2, 1e-2)


def test_gated_ops_of_non_contiguous_views() -> None:
    x = _randn(2000, 64).T  # (64, 2000): a transposed view
    _close(ops.silu_and_mul(x), _silu_and_mul_ref(x.contiguous()), 0.0, 1e-5)
    _close(ops.geglu(x), _geglu_ref(x.contiguous(), -1, "none"), 0.0, 1e-5)
    y = _randn(64, 3000)[:, 500:2500]  # sliced columns
    _close(ops.silu_and_mul(y), _silu_and_mul_ref(y.contiguous()), 0.0, 1e-5)
    a, b = _randn(1000, 64).T, _randn(64, 2000, seed=1)[:, ::2]
    _close(ops.swiglu(a, b), F.silu(a) * b, 1e-5, 1e-6)


# ================================================================================ dropout
# tests/ops/test_dropout.py: x = rand(m) + 1e-5 (no zeros), the share of zeros within 0.04 of
# p when training, and x itself back when not.
@pytest.mark.parametrize(
    ("m", "p", "dtype"),
    [
        (2**10, 0.2, f32),
        (2**12, 0.4, f32),
        (2**16, 0.8, f32),
        (2**16, 0.8, f16),
        (2**12, 0.4, bf16),
    ],
)
@pytest.mark.parametrize("training", [True, False])
def test_dropout(m: int, p: float, dtype: Any, training: bool) -> None:
    x = _rand(m, dtype=dtype) + 1e-5
    x0 = x.clone()
    got = ops.dropout(x, p, training, seed=1234)  # TileGym passes a seed too
    if not training:
        assert got is x
        return
    assert isinstance(got, torch.Tensor) and got.dtype == dtype and got.shape == x.shape
    zeros = 1 - torch.count_nonzero(got).item() / got.numel()
    assert p - 0.04 < zeros < p + 0.04, zeros
    kept = got != 0
    want = (x.float() / (1 - p)).to(dtype)
    torch.testing.assert_close(got[kept], want[kept], rtol=1e-2 if dtype != f32 else 1e-6, atol=0)
    assert torch.equal(x, x0)


def test_dropout_of_a_view_and_per_call_masks() -> None:
    x = _rand(64, 256)[:, ::2] + 1e-5  # stepped columns
    y = ops.dropout(x, 0.5, seed=3)
    torch.testing.assert_close(y, ops.dropout(x.contiguous(), 0.5, seed=3), rtol=0, atol=0)
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] * 2, rtol=1e-6, atol=0)
    assert not torch.equal(ops.dropout(x, 0.5) != 0, ops.dropout(x, 0.5) != 0)  # fresh seeds
    assert not ops.dropout(x, 1.0).any()


def test_dropout_refuses_torchs_positional_inplace_and_takes_it_by_name() -> None:
    x = _rand(4096) + 1e-5
    with pytest.raises(fl.KernelTypeError, match=r"4th argument .* is `seed`, not torch's"):
        ops.dropout(x, 0.5, True, False)  # type: ignore[arg-type]
    a, b = ops.dropout(x, 0.5, True, inplace=False), ops.dropout(x, 0.5, True, inplace=False)
    assert not torch.equal(a != 0, b != 0)  # torch draws a fresh mask per call
    want = ops.dropout(x, 0.5, seed=9)
    y = x.clone()
    assert ops.dropout(y, 0.5, seed=9, inplace=True) is y
    torch.testing.assert_close(y, want, rtol=0, atol=0)
    yn = x.numpy().copy()
    assert ops.dropout(yn, 0.5, seed=9, inplace=True) is yn
    np.testing.assert_array_equal(yn, want.numpy())
    with pytest.raises(fl.KernelTypeError, match="not written in place"):
        ops.dropout(fl.asarray(x.numpy()), 0.5, inplace=True)


# =================================================================================== rope
# tests/ops/test_rope.py: q, k = randn(B, S, H, D).transpose(1, 2) (non-contiguous), cos and
# sin from Llama's rotary embedding, (B, S, D); f32 atol = rtol = 1e-5 (TileGym skips bf16:
# "random result mismatch"; ours runs it at its 1e-2). Partial rotary (cos narrower than D) and
# head_dim 92 are not in fearless: clear errors.
def _llama_tables(bsz: int, seq: int, dim: int, dtype: Any) -> tuple[Any, Any]:
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    freqs = torch.arange(seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], -1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
    return cos.expand(bsz, seq, dim), sin.expand(bsz, seq, dim)


def _rope_ref(q: Any, k: Any, cos: Any, sin: Any) -> tuple[Any, Any]:
    def rotate_half(x: Any) -> Any:
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), -1)

    c, s = cos.float().unsqueeze(1), sin.float().unsqueeze(1)
    out = [(x.float() * c + rotate_half(x.float()) * s).to(x.dtype) for x in (q, k)]
    return out[0], out[1]


@pytest.mark.parametrize(
    ("bsz", "seq", "hq", "hk", "d", "dtype", "tol"),
    [
        (1, 128, 32, 32, 64, f32, 1e-5),
        (1, 128, 32, 8, 64, f32, 1e-5),
        (2, 128, 32, 8, 64, f32, 1e-5),
        (1, 128, 32, 8, 64, bf16, 1e-2),
    ],
)
def test_rope(bsz: int, seq: int, hq: int, hk: int, d: int, dtype: Any, tol: float) -> None:
    q = _randn(bsz, seq, hq, d).transpose(1, 2).to(dtype)
    k = _randn(bsz, seq, hk, d, seed=1).transpose(1, 2).to(dtype)
    cos, sin = _llama_tables(bsz, seq, d, dtype)
    got = ops.rope(q, k, cos, sin)
    assert isinstance(got, tuple) and len(got) == 2
    # q and k are transposed views of (B, S, H, D) tensors (Hugging Face's layout): TileGym's
    # rope rotates them in place and returns them, fearless's returns new tensors of that layout
    for g, w, x in zip(got, _rope_ref(q, k, cos, sin), (q, k), strict=True):
        _close(g, w, tol, tol, like=x)
    # (S, D) tables, contiguous
    got = ops.rope(q, k, cos[0].contiguous(), sin[0].contiguous())
    for g, w, x in zip(got, _rope_ref(q, k, cos[:1], sin[:1]), (q, k), strict=True):
        _close(g, w, tol, tol, like=x)
    # dense q and k give dense results
    for g, w in zip(ops.rope(q.contiguous(), k.contiguous(), cos, sin), _rope_ref(q, k, cos, sin), strict=True):  # fmt: skip
        _close(g, w, tol, tol)


def test_rope_refuses_what_it_does_not_do() -> None:
    q, k = _randn(1, 4, 16, 64), _randn(1, 2, 16, 64)
    cos, sin = _llama_tables(1, 16, 32, f32)  # partial rotary: rope_dim 32 of head_dim 64
    _fearless_error(lambda: ops.rope(q, k, cos, sin), r"`cos` of `fearless\.ops\.rope` has shape")
    q, k = _randn(1, 4, 16, 92), _randn(1, 2, 16, 92)
    cos, sin = _llama_tables(1, 16, 92, f32)
    _fearless_error(lambda: ops.rope(q, k, cos, sin), "power-of-two head_dim")


# ============================================================================== transpose
# TileGym has no test of transpose (none in the GitHub repository's tests/ops; the 1.5.1 wheel
# ships no tests); its kernel uses 64 x 64 tiles, so ours takes shapes around that tile, every
# dtype, and compares bit for bit.
@pytest.mark.parametrize("shape", [(64, 64), (100, 130), (3, 70, 129)])
@pytest.mark.parametrize("dtype", [f32, f16, bf16])
def test_transpose(shape: tuple[int, ...], dtype: Any) -> None:
    x = _randn(*shape, dtype=dtype)
    _close(ops.transpose(x), x.transpose(-2, -1).contiguous(), 0.0, 0.0)


def test_transpose_of_views_and_other_dtypes() -> None:
    x = _randn(130, 100)
    _close(ops.transpose(x.T), x, 0.0, 0.0)  # the transpose of a transposed view
    _close(ops.transpose(x[10:, ::3]), x[10:, ::3].T.contiguous(), 0.0, 0.0)
    i = torch.arange(12 * 7).reshape(12, 7)
    assert torch.equal(ops.transpose(i), i.T)  # "any" dtype


# ====================================================== every configuration of the tuner
@pytest.mark.parametrize(
    ("tuned", "call", "reference", "tol"),
    [
        (
            kernels_rows.softmax_tuned,
            lambda x, *_: ops.softmax(x),
            lambda x, *_: _softmax_ref(x),
            SOFTMAX_TOL[f16],
        ),
        (
            kernels_rows.rms_norm_tuned,
            lambda x, w, *_: ops.rms_norm(x, 1009, w, 1e-5),
            lambda x, w, *_: _rms_ref(x, w, 1e-5),
            RMS_TOL,
        ),
        (
            kernels_rows.layer_norm_tuned,
            lambda x, w, b, _: ops.layer_norm(x, 1009, w, b),
            lambda x, w, b, _: _ln_ref(x, w, b, 1e-5),
            LN_TOL,
        ),
        (
            kernels_gemm.matmul_tuned,
            lambda x, w, b, y: ops.matmul(x, y),
            lambda x, w, b, y: _mm_ref(x, y),
            (1e-2, 1e-2),
        ),
    ],
    ids=["softmax", "rms_norm", "layer_norm", "matmul"],
)
def test_every_tuner_configuration_agrees(
    monkeypatch: pytest.MonkeyPatch, tuned: Any, call: Any, reference: Any, tol: Any
) -> None:
    """On the GPU the tuner may pick any configuration (tiles, persistent, TMA, chunked rows):
    each must give the right answer, here at a prime row length (64 x 1009, f16: TileGym's
    256 x 1009 with fewer rows; the matmul's K)."""
    x = _rand(64, 1009, dtype=f16) * 0.5 - 2.3
    w, b = _randn(1009, dtype=f16, seed=1), _rand(1009, dtype=f16, seed=2)
    y = _rand(1009, 200, dtype=f16, seed=3)
    want = reference(x, w, b, y)
    ran = 0
    for i in range(len(tuned.configs)):
        monkeypatch.setattr(tuned, "_best", {})
        monkeypatch.setattr(tuned, "_choose", lambda key, *_, i=i: i)
        try:
            got = call(x, w, b, y)
        except fl.FearlessError:  # the tuner skips a configuration that cannot launch
            continue
        ran += 1
        _close(got, want, *tol)
    assert ran >= len(tuned.configs) // 2


@pytest.mark.parametrize("m", [256, 100])
def test_every_bmm_configuration_agrees(monkeypatch: pytest.MonkeyPatch, m: int) -> None:
    """bmm's tuner space: the batched kernel, and the flat forms (batch folded into C's rows,
    grouped, clusters, persistent) where their BM divides M (256), the batched kernel where it
    does not (100); K = 1009 is prime."""
    a, b = _rand(2, m, 1009, dtype=f16) - 0.5, _rand(2, 1009, 72, dtype=f16, seed=1) - 0.5
    want = (a.float() @ b.float()).to(f16)
    ran = 0
    for i in range(len(kernels_gemm.bmm_tuned.configs)):
        monkeypatch.setattr(kernels_gemm.bmm_tuned, "_best", {})
        monkeypatch.setattr(kernels_gemm.bmm_tuned, "_choose", lambda key, *_, i=i: i)
        _close(ops.bmm(a, b), want, 1e-2, 1e-2)
        ran += 1
    assert ran == len(kernels_gemm.bmm_tuned.configs)


# ======================================================================= requires_grad
# docs/torch.md: an input that requires grad goes through torch.ops.fearless, whose backward
# runs fearless kernels; the gradients at TileGym's shapes and tolerances.
def _grads(fn: Callable[..., Any], leaves: list[Any], dy: Any) -> tuple[Any, list[Any]]:
    xs = [t.detach().clone().requires_grad_() for t in leaves]
    out = fn(*xs)
    assert out.grad_fn is not None  # recorded, not cut from the graph
    out.backward(dy)
    return out.detach(), [t.grad for t in xs]


@pytest.mark.parametrize(
    ("name", "ours", "reference", "leaves", "dy", "tol"),
    [
        (  # test_layer_norm_legacy.py
            "layer_norm 9x9 f16",
            lambda x, w, b: ops.layer_norm(x, (9,), w, b, 1e-5),
            lambda x, w, b: _ln_ref(x, w, b, 1e-5),
            lambda: [
                _rand(9, 9, dtype=f16) * 0.5 - 2.3,
                _randn(9, dtype=f16, seed=1),
                _rand(9, dtype=f16, seed=2),
            ],
            lambda: 0.1 * _randn(9, 9, dtype=f16, seed=3),
            LN_TOL,
        ),
        (  # test_layer_norm_legacy.py
            "layer_norm 256x256 f32",
            lambda x, w, b: ops.layer_norm(x, (256,), w, b, 1e-5),
            lambda x, w, b: _ln_ref(x, w, b, 1e-5),
            lambda: [_rand(256, 256) * 0.5 - 2.3, _randn(256, seed=1), _rand(256, seed=2)],
            lambda: 0.1 * _randn(256, 256, seed=3),
            LN_TOL,
        ),
        (  # test_silu_and_mul.py (irregular)
            "silu_and_mul 8x100x512 f32",
            ops.silu_and_mul,
            _silu_and_mul_ref,
            lambda: [_randn(8, 100, 1024)],
            lambda: 0.1 * _randn(8, 100, 512, seed=3),
            (0.0, 1e-2),
        ),
        (  # test_geglu.py: dy is f32 (0.1 * randn on the device's default dtype) for f16 x
            "geglu 16x4 f16",
            lambda x: ops.geglu(x, 1, "tanh"),
            lambda x: _geglu_ref(x, 1, "tanh"),
            lambda: [_rand(16, 4, dtype=f16) * 1.2 + 0.6],
            lambda: 0.1 * _randn(16, 2, seed=3),
            (1e-2, 1e-2),
        ),
        (  # test_swiglu.py (backward), the smallest shape with the batch shrunk 8 -> 2
            "swiglu 2x512x512 f16",
            ops.swiglu,
            lambda a, b: (F.silu(a.float()) * b.float()).to(a.dtype),
            lambda: [_randn(2, 512, 512, dtype=f16), _randn(2, 512, 512, dtype=f16, seed=1)],
            lambda: _randn(2, 512, 512, dtype=f16, seed=3),
            (1e-2, 1e-2),
        ),
        (  # test_matmul.py: gradient = torch.rand_like
            "matmul 8x8x8 bf16",
            ops.matmul,
            _mm_ref,
            lambda: [_rand(8, 8, dtype=bf16), _rand(8, 8, dtype=bf16, seed=1)],
            lambda: _rand(8, 8, dtype=bf16, seed=3),
            (1e-2, 1e-2),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_gradients_at_tilegym_shapes(
    name: str, ours: Any, reference: Any, leaves: Any, dy: Any, tol: Any
) -> None:
    xs, g = leaves(), dy()
    got, got_grads = _grads(ours, xs, g)
    want, want_grads = _grads(reference, xs, g)
    _close(got, want, *tol)
    for a, b in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=tol[0], atol=tol[1])


def test_rope_gradients_of_non_contiguous_leaves() -> None:
    """test_rope.py's q and k are clones of transposed views: leaves with (B, S, H, D) strides."""
    q = _randn(1, 128, 8, 64).transpose(1, 2).clone().requires_grad_()
    k = _randn(1, 128, 4, 64, seed=1).transpose(1, 2).clone().requires_grad_()
    assert not q.is_contiguous()
    cos, sin = _llama_tables(1, 128, 64, f32)
    qr, kr = [t.detach().clone().requires_grad_() for t in (q, k)]
    got, want = ops.rope(q, k, cos, sin), _rope_ref(qr, kr, cos, sin)
    dq, dk = _randn(*q.shape, seed=2), _randn(*k.shape, seed=3)
    torch.autograd.backward(got, (dq, dk))
    torch.autograd.backward(want, (dq, dk))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.detach(), w.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(q.grad, qr.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k.grad, kr.grad, rtol=1e-5, atol=1e-5)


def test_requires_grad_of_a_weight_only_and_under_no_grad() -> None:
    x = _randn(64, 768)
    w = _randn(768, seed=1).requires_grad_()
    y = ops.rms_norm(x, 768, w, 1e-6)
    assert y.grad_fn is not None
    y.sum().backward()
    wr = w.detach().clone().requires_grad_()
    F.rms_norm(x, (768,), wr, 1e-6).sum().backward()
    torch.testing.assert_close(w.grad, wr.grad, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        y = ops.softmax(x.requires_grad_())
    assert y.grad_fn is None and not y.requires_grad
    _close(y, F.softmax(x.detach(), -1), *SOFTMAX_TOL[f32])


@pytest.mark.parametrize(("p", "training"), [(0.5, False), (0.0, True)])
def test_dropout_in_eval_mode_with_requires_grad(p: float, training: bool) -> None:
    x = _randn(8, 64).requires_grad_()
    y = ops.dropout(x, p, training)  # model.eval() without torch.no_grad(): torch returns x
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.ones_like(x))


def test_errors_through_the_dispatcher_name_the_problem() -> None:
    x = _randn(8, 16).requires_grad_()
    _fearless_error(lambda: ops.softmax(x, 0), "works over the last axis")
    _fearless_error(lambda: ops.matmul(x, x), "multiplies")
    _fearless_error(lambda: ops.silu_and_mul(_randn(4, 5).requires_grad_()), "two halves")
    _fearless_error(lambda: ops.matmul(x, x.detach().T.half()), "of one dtype")


# ========================================================================= error paths
def _f(*shape: int, dtype: Any = f32) -> Any:
    return torch.zeros(shape, dtype=dtype)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ops.matmul(_f(4, 8), _f(8, 4, dtype=f16)), "of one dtype, got f32 and f16"),
        (lambda: ops.matmul(_f(4, 8, dtype=bf16), _f(8, 4, dtype=f16)), "of one dtype"),
        (lambda: ops.bmm(_f(2, 4, 8), _f(2, 8, 4, dtype=bf16)), "of one dtype"),
        (lambda: ops.swiglu(_f(4, 8), _f(4, 8, dtype=f16)), "of one dtype"),
        (lambda: ops.group_gemm([_f(4, 8)], [_f(8, 4, dtype=f16)]), "of one dtype"),
        (
            lambda: ops.rope(_f(1, 2, 4, 16), _f(1, 2, 4, 16, dtype=f16), _f(4, 16), _f(4, 16)),
            "of one dtype",
        ),
        (lambda: ops.softmax(_f(4, 8, dtype=torch.float64)), "takes f32, f16, bf16"),
        (lambda: ops.gelu(torch.zeros(4, dtype=torch.int32)), "takes f32, f16, bf16"),
        (lambda: ops.layer_norm(_f(4, 8), 8, _f(8, dtype=torch.int64)), "takes f32, f16, bf16"),
        (lambda: ops.matmul(_f(4, 8), _f(4, 8)), r"multiplies \(M, K\) @ \(K, N\)"),
        (lambda: ops.matmul(_f(2, 4, 8), _f(8, 4)), r"multiplies \(M, K\) @ \(K, N\)"),
        (lambda: ops.matmul(_f(8), _f(8, 4)), r"multiplies \(M, K\) @ \(K, N\)"),
        (lambda: ops.bmm(_f(2, 4, 8), _f(3, 8, 4)), r"\(B, M, K\) @ \(B, K, N\)"),
        (lambda: ops.bmm(_f(4, 8), _f(8, 4)), r"\(B, M, K\) @ \(B, K, N\)"),
        (lambda: ops.swiglu(_f(4, 8), _f(4, 9)), "of one shape"),
        (lambda: ops.group_gemm([_f(4, 8)], [_f(8, 4), _f(8, 4)]), "pairs As and Bs"),
        (lambda: ops.group_gemm([_f(4, 8), _f(4, 8)], [_f(8, 4), _f(9, 4)]), "multiplies"),
        (lambda: ops.rms_norm(_f(4, 8), (2, 8)), "normalized_shape must be"),
        (lambda: ops.rms_norm(_f(4, 8), 8, _f(4)), "has shape"),
        (lambda: ops.layer_norm(_f(4, 8), 8, None, _f(9)), "has shape"),
        (lambda: ops.silu_and_mul(_f(3, 7)), "two halves"),
        (lambda: ops.geglu(_f(3, 7)), "two halves"),
        (lambda: ops.rope(_f(1, 2, 4, 16), _f(2, 2, 4, 16), _f(4, 16), _f(4, 16)), "one batch"),
        (lambda: ops.rope(_f(2, 4, 16), _f(2, 4, 16), _f(4, 16), _f(4, 16)), "takes q and k"),
        (lambda: ops.transpose(_f(2, 3, 4, 5)), "matrix or a batch of matrices"),
        (lambda: ops.dropout(_f(8), 1.5), "between 0 and 1"),
        (lambda: ops.softmax(torch.tensor(1.0)), "works over the last axis"),  # 0-d
        (lambda: ops.matmul(_f(2, 2).tolist(), _f(2, 2)), "must be a tensor"),
    ],
)
def test_error_paths_are_fearless_errors(call: Callable[[], Any], message: str) -> None:
    _fearless_error(call, message)


# ================================================================ the kind returned
def _np(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


_ANGLES = np.tile(_np(5, 8, seed=9), 2)  # both halves alike, as Hugging Face's tables
TABLES = (np.cos(_ANGLES), np.sin(_ANGLES))
# name: (call, torch reference, input shapes)
KINDS: dict[str, tuple[Callable[..., Any], Callable[..., Any], list[tuple[int, ...]]]] = {
    "softmax": (ops.softmax, lambda x: F.softmax(x, -1), [(3, 5, 40)]),
    "rms_norm": (
        lambda x, w: ops.rms_norm(x, 40, w, 1e-6),
        lambda x, w: F.rms_norm(x, (40,), w, 1e-6),
        [(6, 40), (40,)],
    ),
    "layer_norm": (
        lambda x, w, b: ops.layer_norm(x, 40, w, b),
        lambda x, w, b: F.layer_norm(x, (40,), w, b),
        [(6, 40), (40,), (40,)],
    ),
    "matmul": (ops.matmul, torch.matmul, [(9, 20), (20, 7)]),
    "bmm": (ops.bmm, torch.bmm, [(2, 9, 20), (2, 20, 7)]),
    "relu": (ops.relu, F.relu, [(7, 130)]),
    "gelu": (ops.gelu, F.gelu, [(7, 130)]),
    "silu_and_mul": (ops.silu_and_mul, _silu_and_mul_ref, [(5, 64)]),
    "geglu": (ops.geglu, lambda x: _geglu_ref(x, -1, "none"), [(5, 64)]),
    "swiglu": (ops.swiglu, lambda a, b: F.silu(a) * b, [(5, 48), (5, 48)]),
    "dropout": (
        lambda x: ops.dropout(x, 0.3, seed=5),
        lambda x: x,  # compared where kept, below
        [(8, 300)],
    ),
    "transpose": (ops.transpose, lambda x: x.T, [(33, 70)]),
    "rope": (
        lambda q, k: ops.rope(q, k, *TABLES),
        lambda q, k: _rope_ref(q, k, *(torch.from_numpy(t)[None] for t in TABLES)),
        [(2, 3, 5, 16), (2, 1, 5, 16)],
    ),
    "group_gemm": (
        lambda a, b, c, d: ops.group_gemm([a, c], [b, d]),
        lambda a, b, c, d: [a @ b, c @ d],
        [(4, 6), (6, 3), (5, 2), (2, 7)],
    ),
}


@pytest.mark.parametrize("kind", ["numpy", "fl", "torch"])
@pytest.mark.parametrize("name", list(KINDS))
def test_the_kind_given_is_the_kind_returned(name: str, kind: str) -> None:
    call, reference, shapes = KINDS[name]
    arrays = [_np(*s, seed=i) for i, s in enumerate(shapes)]
    wrap = {
        "numpy": lambda a: a,
        "fl": fl.asarray,
        "torch": torch.from_numpy,
    }[kind]
    kind_type = {"numpy": np.ndarray, "fl": fl.Tensor, "torch": torch.Tensor}[kind]
    got = call(*[wrap(a) for a in arrays])
    want = reference(*[torch.from_numpy(a) for a in arrays])
    got_list = list(got) if isinstance(got, (tuple, list)) else [got]
    want_list = list(want) if isinstance(want, (tuple, list)) else [want]
    if name in ("rope", "group_gemm"):
        assert type(got) is type(want)  # a tuple, a list
    for g, w in zip(got_list, want_list, strict=True):
        assert isinstance(g, kind_type), type(g)
        back = (
            g if kind == "torch" else torch.from_numpy(np.asarray(g.numpy() if kind == "fl" else g))
        )
        assert tuple(back.shape) == tuple(w.shape) and back.dtype == w.dtype
        if name == "dropout":
            kept = back != 0
            torch.testing.assert_close(back[kept], w[kept] / 0.7, rtol=1e-6, atol=0)
        else:
            torch.testing.assert_close(back, w.contiguous(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [fl.f16, fl.bf16])
def test_half_precision_numpy_and_fl_tensors(dtype: Any) -> None:
    x = fl.asarray(_np(16, 100), dtype=dtype)
    host = x.numpy()  # float16, or ml_dtypes' bfloat16
    want = F.softmax(torch.from_numpy(host.astype(np.float32)), -1)
    tol = DEFAULT_TOL[f16 if dtype == fl.f16 else bf16]
    got_np = ops.softmax(host)
    assert isinstance(got_np, np.ndarray) and got_np.dtype == host.dtype
    torch.testing.assert_close(
        torch.from_numpy(got_np.astype(np.float32)), want, rtol=tol[0], atol=tol[1]
    )
    got_fl = ops.softmax(x)
    assert isinstance(got_fl, fl.Tensor) and got_fl.dtype == dtype
    np.testing.assert_array_equal(got_fl.numpy().astype(np.float32), got_np.astype(np.float32))


def test_torch_results_are_new_tensors_on_the_same_device() -> None:
    x = _randn(8, 64)
    for y in (ops.softmax(x), ops.relu(x), ops.gelu(x), ops.transpose(x)):
        assert isinstance(y, torch.Tensor) and y.device == x.device
        assert y.data_ptr() != x.data_ptr() and y.is_contiguous()
    with torch.inference_mode():
        xi = _randn(8, 64)
        _close(ops.softmax(xi), F.softmax(xi, -1), *SOFTMAX_TOL[f32])


def test_dtype_and_rope_table_errors_speak_the_input_kind() -> None:
    ints = np.arange(16, dtype=np.int32).reshape(4, 4)
    e = _fearless_error(lambda: ops.relu(ints), "takes f32, f16, bf16 tensors")
    assert "`x.astype(np.float32)`" in str(e) and "torch" not in str(e.help or "")
    q = _rand(1, 2, 4, 16)
    bad = _rand(5, 16)
    e = _fearless_error(lambda: ops.rope(q, q, bad, bad), "needs")
    assert "(1, 4, 16)" in str(e) and "1 or 1" not in str(e)
