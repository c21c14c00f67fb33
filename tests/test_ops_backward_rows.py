"""The backward of fearless.ops' row operators (ops/backward_rows.py) on the simulator, against
torch's CPU autograd: f32 tightly, f16 and bf16 loosely, weight and bias given or None, rows
whole and in chunks, every autotuner configuration, and the tensor kinds in and out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config
from fearless.ops import kernels_rows_backward as kb
from fearless.ops.backward_rows import layer_norm_backward, rms_norm_backward, softmax_backward

torch = pytest.importorskip("torch")
F = torch.nn.functional


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")  # the first configuration


def _randn(*shape: int, seed: int = 0) -> Any:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def _grads(fn: Callable[..., Any], dy: Any, *inputs: Any) -> list[Any]:
    """torch's gradients of fn(*inputs) for the output gradient dy (None for None inputs)."""
    leaves = [None if t is None else t.detach().clone().requires_grad_() for t in inputs]
    fn(*leaves).backward(dy)
    return [None if t is None else t.grad for t in leaves]


def _close(got: Any, want: Any, tol: float) -> None:
    assert isinstance(got, torch.Tensor) and got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol)


SHAPES = [(3, 5, 40), (7, 130), (1, 5000)]  # (1, 5000): the chunked form


@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_backward_matches_autograd(shape: tuple[int, ...]) -> None:
    x, dy = _randn(*shape), _randn(*shape, seed=1)
    y = torch.softmax(x, -1)
    (want,) = _grads(lambda t: torch.softmax(t, -1), dy, x)
    _close(softmax_backward(y, dy), want, 1e-5)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_weight", [True, False])
def test_rms_norm_backward_matches_autograd(shape: tuple[int, ...], with_weight: bool) -> None:
    n = shape[-1]
    x, dy = _randn(*shape), _randn(*shape, seed=1)
    w = _randn(n, seed=2) if with_weight else None
    want = _grads(lambda t, v: F.rms_norm(t, (n,), v, 1e-6), dy, x, w)
    dx, dw = rms_norm_backward(dy, x, w, 1e-6)
    _close(dx, want[0], 1e-5)
    if with_weight:
        _close(dw, want[1], 1e-4)  # a sum over every row
    else:
        assert dw is None


@pytest.mark.parametrize(
    ("shape", "params"),
    [(s, p) for s in SHAPES[:2] for p in ("wb", "w", "b", "")]
    + [(SHAPES[2], "wb"), (SHAPES[2], "")],  # the chunked form with both parameters, and none
)
def test_layer_norm_backward_matches_autograd(shape: tuple[int, ...], params: str) -> None:
    n = shape[-1]
    x, dy = _randn(*shape), _randn(*shape, seed=1)
    w = _randn(n, seed=2) if "w" in params else None
    b = _randn(n, seed=3) if "b" in params else None
    want = _grads(lambda t, v, c: F.layer_norm(t, (n,), v, c, 1e-5), dy, x, w, b)
    dx, dw, db = layer_norm_backward(dy, x, w, b, 1e-5)
    _close(dx, want[0], 1e-5)
    for got, ref in ((dw, want[1]), (db, want[2])):
        if ref is None:
            assert got is None
        else:
            _close(got, ref, 1e-4)


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16])
def test_half_precision_matches_autograd_in_f32(dt: Any) -> None:
    """f16 and bf16 inputs, the math in f32: torch's f32 autograd of the same rounded values,
    within the output dtype's rounding (and the parameter sums' accumulated rounding)."""
    shape, n = (6, 3, 200), 200
    x, dy = _randn(*shape).to(dt), _randn(*shape, seed=1).to(dt)
    w, b = _randn(n, seed=2).to(dt), _randn(n, seed=3).to(dt)
    tol = 1e-2 if dt == torch.float16 else 4e-2
    f = [t.float() for t in (x, dy, w, b)]

    y = torch.softmax(f[0], -1).to(dt)
    (want,) = _grads(lambda t: torch.softmax(t, -1), f[1], f[0])
    got = softmax_backward(y, dy)
    _close(got, want.to(dt), tol)

    want_x, want_w = _grads(lambda t, v: F.rms_norm(t, (n,), v, 1e-6), f[1], f[0], f[2])
    dx, dw = rms_norm_backward(dy, x, w, 1e-6)
    _close(dx, want_x.to(dt), tol)
    torch.testing.assert_close(dw.float(), want_w, rtol=tol, atol=tol * want_w.abs().max())
    assert dw.dtype == dt

    grads = _grads(lambda t, v, c: F.layer_norm(t, (n,), v, c, 1e-5), f[1], f[0], f[2], f[3])
    got3 = layer_norm_backward(dy, x, w, b, 1e-5)
    _close(got3[0], grads[0].to(dt), tol)
    for g, ref in zip(got3[1:], grads[1:], strict=True):
        assert g.dtype == dt
        torch.testing.assert_close(g.float(), ref, rtol=tol, atol=tol * ref.abs().max())


def test_numpy_and_fl_tensors_in_give_their_kind_back() -> None:
    x = _randn(5, 64).numpy()
    dy = _randn(5, 64, seed=1).numpy()
    w = _randn(64, seed=2).numpy()
    want = _grads(
        lambda t, v: F.layer_norm(t, (64,), v, None),
        torch.from_numpy(dy),
        *map(torch.from_numpy, (x, w)),
    )
    dx, dw, db = layer_norm_backward(dy, x, w, None, 1e-5)
    assert isinstance(dx, np.ndarray) and isinstance(dw, np.ndarray) and db is None
    np.testing.assert_allclose(dx, want[0].numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dw, want[1].numpy(), rtol=1e-4, atol=1e-4)
    dxt, dwt = rms_norm_backward(fl.asarray(dy), fl.asarray(x), fl.asarray(w), 1e-6)
    assert isinstance(dxt, fl.Tensor) and isinstance(dwt, fl.Tensor) and dwt.shape == (64,)
    y = torch.softmax(torch.from_numpy(x), -1).numpy()
    got = softmax_backward(fl.asarray(y), dy)  # the kind of the first argument
    assert isinstance(got, fl.Tensor)
    np.testing.assert_allclose(got.numpy(), y * (dy - (dy * y).sum(-1, keepdims=True)), atol=1e-6)


@pytest.mark.parametrize("shape", [(9, 130), (3, 5000)])
def test_every_configuration_computes_the_same(shape: tuple[int, ...]) -> None:
    """Each configuration the tuner may pick (rows per block, persistent or not, chunk sizes,
    grids of partial sums) against autograd, so a tuned choice is never a wrong one."""
    _, n = shape
    x, dy, w, b = _randn(*shape), _randn(*shape, seed=1), _randn(n, seed=2), _randn(n, seed=3)
    want = _grads(lambda t, v, c: F.layer_norm(t, (n,), v, c, 1e-5), dy, x, w, b)
    y = torch.softmax(x, -1)
    want_s = y * (dy - (dy * y).sum(-1, keepdim=True))
    args = [fl.asarray(t.numpy()) for t in (dy, x, w)]
    for cfg in kb.NORM_BWD_CONFIGS:
        dx = fl.empty(shape)
        pw, pb = kb.layer_norm_bwd_tuned.fn(*args, 1e-5, dx, **cfg).numpy()  # planes dw, db
        np.testing.assert_allclose(dx.numpy(), want[0].numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(pw.sum(0), want[1].numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(pb.sum(0), want[2].numpy(), rtol=1e-4, atol=1e-4)
    for cfg in kb.SOFTMAX_BWD_CONFIGS:
        dx = fl.empty(shape)
        kb.softmax_bwd_tuned.fn(fl.asarray(y.numpy()), args[0], dx, **cfg)
        np.testing.assert_allclose(dx.numpy(), want_s.numpy(), rtol=1e-5, atol=1e-6)


def test_the_tuned_path_picks_a_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    """With tuning on, every configuration runs once per key (each call zeroes its own partial
    sums, so the timed repeats do not add up) and the chosen one gives the gradients."""
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "1")
    x, dy, w = _randn(3, 100), _randn(3, 100, seed=1), _randn(100, seed=2)
    want = _grads(lambda t, v: F.rms_norm(t, (100,), v, 1e-6), dy, x, w)
    dx, dw = rms_norm_backward(dy, x, w, 1e-6)
    _close(dx, want[0], 1e-5)
    _close(dw, want[1], 1e-4)


def test_no_rows_gives_zero_parameter_gradients() -> None:
    x = torch.zeros(0, 8)
    dx, dw, db = layer_norm_backward(x, x, torch.ones(8), torch.zeros(8), 1e-5)
    assert (
        dx.shape == (0, 8) and torch.equal(dw, torch.zeros(8)) and torch.equal(db, torch.zeros(8))
    )


def test_mismatched_shapes_are_refused() -> None:
    with pytest.raises(fl.KernelTypeError, match="has shape") as info:
        rms_norm_backward(np.zeros((2, 8), np.float32), np.zeros((2, 4), np.float32), None, 1e-6)
    assert info.value.code == "E0701" and "test_ops_backward_rows.py" in str(info.value)
    with pytest.raises(fl.KernelTypeError, match="normalized axis has 8"):
        x = np.zeros((2, 8), np.float32)
        layer_norm_backward(x, x, np.ones(4, np.float32), None, 1e-5)


def test_the_backward_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    """Each kernel form, chunked ones in chunks of 256 (the compile time grows with the chunk)."""
    bf16, n = fl.bf16, 1024

    def args(k: int, *scalars: Any) -> tuple[Any, ...]:
        """dx's partition, k planes of partial sums, then dy (or y), x (or dy), and for the norms
        w."""
        dx = fl.zeros((8, n), dtype=bf16).partition((1, n))
        sums = [fl.zeros((k, 8, n), dtype=fl.f32)] if k else []
        inputs = [fl.zeros((8, n), dtype=bf16) for _ in range(2)]
        w = [fl.zeros(n, dtype=bf16)] if scalars else []
        return (dx, *sums, *inputs, *w, *scalars)

    cases = [
        (kb.make_softmax_bwd(bf16), args(0)),
        (kb.make_softmax_bwd(bf16, persistent=True, chunk=256), args(0)),
        (kb.make_norm_bwd(bf16, False), args(1, 1e-6)),
        (kb.make_norm_bwd(bf16, False, chunk=256), args(1, 1e-6)),
        (kb.make_norm_bwd(bf16, True), args(2, 1e-5)),
        (kb.make_norm_bwd(bf16, True, chunk=256), args(2, 1e-5)),
        (kb.make_column_sum(bf16), (fl.zeros(n, dtype=bf16).partition((64,)), args(2)[1], 1, 32)),
    ]
    for kernel, arguments in cases:
        assert cubin(kernel, *arguments)
