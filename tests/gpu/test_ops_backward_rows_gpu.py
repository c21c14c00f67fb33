"""The row operators' backward (ops/backward_rows.py) on the H200 against torch's CUDA autograd
in f32 (of the same rounded inputs), with torch tensors in and out, up to (4096, 4096) bf16 and
rows of 16384 (the chunked kernels)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fearless.ops.backward_rows import layer_norm_backward, rms_norm_backward, softmax_backward

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 4e-2}
SHAPES = [
    ((3, 5, 40), torch.float32),
    ((512, 4000), torch.float32),
    ((512, 4000), torch.float16),
    ((4096, 4096), torch.bfloat16),
    ((64, 16384), torch.bfloat16),
]


def _inputs(shape: tuple[int, ...], dt: Any) -> list[Any]:
    g = torch.Generator(device="cuda").manual_seed(0)
    n = shape[-1]
    return [torch.randn(*s, device="cuda", generator=g).to(dt) for s in (shape, shape, (n,), (n,))]


def _grads(fn: Callable[..., Any], dy: Any, *inputs: Any) -> list[Any]:
    """torch's f32 gradients of fn(*inputs) for the output gradient dy."""
    leaves = [t.detach().float().requires_grad_() for t in inputs]
    fn(*leaves).backward(dy.float())
    return [t.grad for t in leaves]


def _close(got: Any, want: Any, dt: Any, summed: bool = False) -> None:
    """got (dt, on the GPU) against the f32 reference; a sum over rows (dw, db) is compared
    relative to its largest element, its rounding grows with the sum."""
    assert isinstance(got, torch.Tensor) and got.device == want.device and got.dtype == dt
    tol = TOL[dt]
    atol = tol * float(want.abs().max()) if summed else tol
    torch.testing.assert_close(got.float(), want, rtol=tol, atol=atol)


@pytest.mark.parametrize(("shape", "dt"), SHAPES)
def test_softmax_backward_matches_torch(shape: tuple[int, ...], dt: Any) -> None:
    x, dy, _, _ = _inputs(shape, dt)
    y = torch.softmax(x.float(), -1).to(dt)  # the forward's output, rounded to dt
    (want,) = _grads(lambda t: torch.softmax(t, -1), dy, x)
    _close(softmax_backward(y, dy), want, dt)


@pytest.mark.parametrize(("shape", "dt"), SHAPES)
def test_rms_norm_backward_matches_torch(shape: tuple[int, ...], dt: Any) -> None:
    x, dy, w, _ = _inputs(shape, dt)
    n = shape[-1]
    want_x, want_w = _grads(lambda t, v: F.rms_norm(t, (n,), v, 1e-6), dy, x, w)
    dx, dw = rms_norm_backward(dy, x, w, 1e-6)
    _close(dx, want_x, dt)
    _close(dw, want_w, dt, summed=True)
    assert torch.equal(rms_norm_backward(dy, x, w, 1e-6)[1], dw)  # deterministic sums


@pytest.mark.parametrize(("shape", "dt"), SHAPES)
def test_layer_norm_backward_matches_torch(shape: tuple[int, ...], dt: Any) -> None:
    x, dy, w, b = _inputs(shape, dt)
    n = shape[-1]
    want = _grads(lambda t, v, c: F.layer_norm(t, (n,), v, c, 1e-5), dy, x, w, b)
    dx, dw, db = layer_norm_backward(dy, x, w, b, 1e-5)
    _close(dx, want[0], dt)
    _close(dw, want[1], dt, summed=True)
    _close(db, want[2], dt, summed=True)
    again = layer_norm_backward(dy, x, w, b, 1e-5)
    assert torch.equal(again[1], dw) and torch.equal(again[2], db)  # deterministic sums


def test_without_parameters_matches_torch() -> None:
    x, dy, _, _ = _inputs((256, 1000), torch.bfloat16)
    (want,) = _grads(lambda t: F.layer_norm(t, (1000,), None, None, 1e-5), dy, x)
    dx, dw, db = layer_norm_backward(dy, x, None, None, 1e-5)
    assert dw is None and db is None
    _close(dx, want, torch.bfloat16)
    (want,) = _grads(lambda t: F.rms_norm(t, (1000,), None, 1e-6), dy, x)
    dx, dw = rms_norm_backward(dy, x, None, 1e-6)
    assert dw is None
    _close(dx, want, torch.bfloat16)
