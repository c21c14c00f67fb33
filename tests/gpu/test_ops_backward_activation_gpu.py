"""The activations' backward (ops/backward_activation.py) on the H200 against torch's CUDA
autograd, with torch tensors in and out, up to (4096, 4096) bf16."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fearless.ops import backward_activation as bw
from support.backward_activation_cases import UNARY as CASES  # the CPU test's cases

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

TOL = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 1.6e-2}


def _grads(forward: Callable[..., Any], dy: Any, *xs: Any) -> list[Any]:
    """torch's CUDA autograd in f32 of the given (rounded) inputs."""
    leaves = [x.detach().float().clone().requires_grad_() for x in xs]
    forward(*leaves).backward(dy.float())
    return [t.grad for t in leaves]


def _close(got: Any, want: Any, dt: Any) -> None:
    assert isinstance(got, torch.Tensor) and got.device == want.device and got.dtype == dt
    tol = TOL[dt]
    scale = max(1.0, float(want.abs().max()))  # tanh rounding to +-1 aside (see the CPU test)
    torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol * scale)


@pytest.mark.parametrize(
    ("shape", "dt"),
    [
        ((4096, 4096), torch.bfloat16),
        ((3, 517, 1030), torch.float32),
        ((64, 2, 1024), torch.float16),
    ],
)
@pytest.mark.parametrize("name", list(CASES))
def test_backward_matches_torch_autograd(name: str, shape: tuple[int, ...], dt: Any) -> None:
    backward, forward = CASES[name]
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(shape, device="cuda", generator=g) * 3).to(dt)
    dy = torch.randn(forward(x.float()).shape, device="cuda", generator=g).to(dt)
    (want,) = _grads(forward, dy, x)
    _close(backward(dy, x), want, dt)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_swiglu_backward_matches_torch_autograd(dt: Any) -> None:
    g = torch.Generator(device="cuda").manual_seed(1)
    a, b, dy = (torch.randn(4096, 4096, device="cuda", generator=g).to(dt) for _ in range(3))
    want_a, want_b = _grads(lambda u, v: F.silu(u) * v, dy, a, b)
    da, db = bw.swiglu_backward(dy, a, b)
    _close(da, want_a, dt)
    _close(db, want_b, dt)


def test_the_backward_takes_non_contiguous_torch_tensors() -> None:
    x = torch.randn(2048, 512, device="cuda").t()  # a transposed view
    dy = torch.randn(512, 2048, device="cuda")
    (want,) = _grads(F.gelu, dy, x)
    _close(bw.gelu_backward(dy, x), want, torch.float32)
