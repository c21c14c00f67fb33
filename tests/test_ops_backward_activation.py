"""The activations' backward (ops/backward_activation.py) on the simulator against torch's CPU
autograd: relu, gelu (exact and tanh), silu_and_mul, geglu and swiglu in f32, f16 and bf16,
odd sizes, the tensor kinds in and out, the errors, and the kernels through tileiras."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config
from fearless.ops import backward_activation as bw
from fearless.ops import kernels_activation_backward as ka_b
from fearless.ops.kernels_activation import ELEMENTWISE_CONFIGS
from fearless.ops.kernels_activation_backward import GATED_BACKWARD_CONFIGS
from support.backward_activation_cases import UNARY, F, _gated, torch


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# f32: the kernel's f32 against torch's f32 (erf's 1.5e-7 under the rest); halves: one rounding.
# atol is relative to the largest gradient: where tanh(x) rounds to -1 in one and not in the
# other, gelu_tanh's tiny derivative (~1e-7) times dy * up differs from torch's exact 0.
TOL = {"f32": (1e-5, 1e-5), "f16": (4e-3, 1e-3), "bf16": (1.6e-2, 4e-3)}


def _inputs(shape: tuple[int, ...], dt: Any, seed: int) -> Any:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 3
    x.view(-1)[::7] = 0.0  # relu's gradient at 0 is 0, as torch's
    return x.to(dt)


def _torch_grads(forward: Callable[..., Any], dy: Any, *xs: Any) -> list[Any]:
    """torch's CPU autograd in f32 of the given (rounded) inputs."""
    leaves = [x.detach().float().clone().requires_grad_() for x in xs]
    forward(*leaves).backward(dy.float())
    return [t.grad for t in leaves]


def _close(got: Any, want: Any, dt: str) -> None:
    assert isinstance(got, torch.Tensor) and got.dtype == DTYPES[dt]
    rtol, atol = TOL[dt]
    scale = max(1.0, float(want.abs().max())) if want.numel() else 1.0
    torch.testing.assert_close(got.float(), want, rtol=rtol, atol=atol * scale)


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("name", list(UNARY))
def test_backward_matches_torch_autograd(name: str, dt: str) -> None:
    backward, forward = UNARY[name]
    for seed, shape in enumerate([(3, 5, 64), (7, 130), (2, 1030)]):
        x = _inputs(shape, DTYPES[dt], seed)
        out_shape = forward(x.float()).shape
        dy = _inputs(out_shape, DTYPES[dt], seed + 10)
        (want,) = _torch_grads(forward, dy, x)
        got = backward(dy, x)
        assert got.shape == x.shape
        _close(got, want, dt)


@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_swiglu_backward_matches_torch_autograd(dt: str) -> None:
    for seed, shape in enumerate([(3, 5, 64), (7, 130)]):
        a, b = _inputs(shape, DTYPES[dt], seed), _inputs(shape, DTYPES[dt], seed + 1)
        dy = _inputs(shape, DTYPES[dt], seed + 2)
        want_a, want_b = _torch_grads(lambda u, v: F.silu(u) * v, dy, a, b)
        da, db = bw.swiglu_backward(dy, a, b)
        _close(da, want_a, dt)
        _close(db, want_b, dt)


def test_relu_backward_is_torchs_at_zero_and_nan() -> None:
    x = torch.tensor([-1.0, -0.0, 0.0, 1e-30, 2.0, np.nan, -np.inf, np.inf])
    dy = torch.arange(1.0, 9.0)
    (want,) = _torch_grads(F.relu, dy, x)
    assert want.tolist() == [0, 0, 0, 4, 5, 6, 0, 8]  # torch passes dy at a NaN
    torch.testing.assert_close(bw.relu_backward(dy, x), want, rtol=0, atol=0)


def test_numpy_and_fl_tensor_inputs_give_their_kind_back() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6, 40)).astype(np.float32)
    dy = rng.standard_normal((4, 6, 20)).astype(np.float32)
    (want,) = _torch_grads(_gated(F.silu), torch.from_numpy(dy), torch.from_numpy(x))
    got = bw.silu_and_mul_backward(dy, x)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)
    t = bw.silu_and_mul_backward(fl.asarray(dy), fl.asarray(x))
    assert isinstance(t, fl.Tensor) and t.shape == x.shape
    np.testing.assert_allclose(t.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    da, db = bw.swiglu_backward(fl.asarray(dy), x[..., :20].copy(), fl.asarray(x[..., 20:]))
    assert isinstance(da, fl.Tensor) and isinstance(db, fl.Tensor)
    want_a, want_b = _torch_grads(
        lambda u, v: F.silu(u) * v, torch.from_numpy(dy), *torch.from_numpy(x).split(20, -1)
    )
    np.testing.assert_allclose(da.numpy(), want_a.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(db.numpy(), want_b.numpy(), rtol=1e-5, atol=1e-5)
    empty = np.zeros((0, 8), np.float32)
    assert bw.gelu_backward(empty, empty).shape == (0, 8)
    assert bw.geglu_backward(np.zeros((0, 4), np.float32), empty).shape == (0, 8)


def _f32(*shape: int) -> np.ndarray:
    return np.zeros(shape, np.float32)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: bw.relu_backward(_f32(4), _f32(5)), r"`dy` .* has shape \(4,\), but `x` has"),
        (lambda: bw.silu_and_mul_backward(_f32(2, 4), _f32(2, 7)), "two halves"),
        (lambda: bw.geglu_backward(_f32(2, 4), _f32(2, 4)), "the forward's output"),
        (lambda: bw.swiglu_backward(_f32(3), _f32(3), _f32(4)), r"`b` .* has shape \(4,\)"),
        (
            lambda: bw.gelu_backward(_f32(3), np.zeros(3, np.float16)),
            "`dy` and `x` of one dtype, got f32 and f16",
        ),
        (lambda: bw.gelu_backward(_f32(3), _f32(3), approximate="fast"), "'none' or 'tanh'"),
        (lambda: bw.relu_backward([1.0], _f32(1)), "must be a tensor"),
        (lambda: bw.relu_backward(np.zeros(2, np.int32), _f32(2)), "takes f32, f16, bf16"),
    ],
)
def test_errors_name_the_problem(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(fl.KernelTypeError, match=message) as info:
        call()
    assert info.value.code == "E0701" and "test_ops_backward_activation.py" in str(info.value)


def test_the_backward_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    from fearless.ops import kernels_activation_backward as k

    bf16, n = fl.bf16, 4096

    def flat(dt: Any = bf16) -> fl.Tensor:
        return fl.zeros(n, dtype=dt)

    gated = (
        fl.zeros((8, 2, 512), dtype=bf16).partition((4, 2, 256)),
        fl.zeros((8, 1, 512), dtype=bf16),
        fl.zeros((8, 2, 512), dtype=bf16),
    )
    cases = [
        *[
            (k.make_unary_backward(kind, bf16), (flat().partition((1024,)), flat(), flat()))
            for kind in ("relu", "gelu", "gelu_tanh")
        ],
        (
            k.make_unary_backward("gelu", fl.f16),
            (flat(fl.f16).partition((1024,)), flat(fl.f16), flat(fl.f16)),
        ),
        *[(k.make_gated_backward(kind, bf16), gated) for kind in ("silu", "gelu", "gelu_tanh")],
        (  # the tuner's widest tile
            k.make_gated_backward("silu", bf16),
            (
                fl.zeros((8, 2, 1024), dtype=bf16).partition((4, 2, 1024)),
                *[fl.zeros(s, dtype=bf16) for s in ((8, 1, 1024), (8, 2, 1024))],
            ),
        ),
        (
            k.make_swiglu_backward(bf16),
            (flat().partition((1024,)), flat().partition((1024,)), flat(), flat(), flat()),
        ),
    ]
    for kernel, args in cases:
        assert cubin(kernel, *args)


@pytest.mark.parametrize("config", GATED_BACKWARD_CONFIGS, ids=str)
def test_every_gated_backward_configuration_matches_torch(config: dict[str, Any]) -> None:
    """Each (BM, 2, BN) tile the tuner may choose, on a d that none of them divides."""
    x = _inputs((5, 2 * 300), torch.float32, 1)
    dy = _inputs((5, 300), torch.float32, 2)
    (want,) = _torch_grads(_gated(F.silu), dy, x)
    xs, dys = fl.asarray(x.numpy().reshape(5, 2, 300)), fl.asarray(dy.numpy().reshape(5, 1, 300))
    dx = fl.empty((5, 2, 300))
    ka_b.gated_backward_tuned.fn("silu", dys, xs, dx, **config)
    _close(torch.from_numpy(dx.numpy()).reshape(5, 600), want, "f32")


@pytest.mark.parametrize("config", ELEMENTWISE_CONFIGS, ids=str)
def test_every_swiglu_backward_configuration_matches_torch(config: dict[str, Any]) -> None:
    a, b, dy = (_inputs((3, 1000), torch.float32, s) for s in range(3))
    want_a, want_b = _torch_grads(lambda u, v: F.silu(u) * v, dy, a, b)
    da, db = fl.empty((3, 1000)), fl.empty((3, 1000))
    args = (fl.asarray(t.numpy()) for t in (dy, a, b))
    ka_b.swiglu_backward_tuned.fn(*args, da, db, 12, **config)
    _close(torch.from_numpy(da.numpy()), want_a, "f32")
    _close(torch.from_numpy(db.numpy()), want_b, "f32")
