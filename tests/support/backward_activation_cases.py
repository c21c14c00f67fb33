"""The unary activations and their backward references: the cases the simulator test and
tests/gpu/test_ops_backward_activation_gpu.py share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fearless.ops import backward_activation as bw

torch = pytest.importorskip("torch")


F = torch.nn.functional


def _gated(act: Callable[[Any], Any], gate_first: bool = True) -> Callable[[Any], Any]:
    """silu_and_mul's act(x[..., :d]) * x[..., d:], or geglu's x[..., :d] * act(x[..., d:])."""

    def forward(x: Any) -> Any:
        d = x.shape[-1] // 2
        if gate_first:
            return act(x[..., :d]) * x[..., d:]
        return x[..., :d] * act(x[..., d:])

    return forward


def _tanh_gelu(x: Any) -> Any:
    return F.gelu(x, approximate="tanh")


# (backward under test, torch forward, the forward's output shape from x's)
UNARY = {
    "relu": (bw.relu_backward, F.relu),
    "gelu": (bw.gelu_backward, F.gelu),
    "gelu_tanh": (lambda dy, x: bw.gelu_backward(dy, x, approximate="tanh"), _tanh_gelu),
    "silu_and_mul": (bw.silu_and_mul_backward, _gated(F.silu)),
    "geglu": (bw.geglu_backward, _gated(F.gelu, gate_first=False)),
    "geglu_tanh": (
        lambda dy, x: bw.geglu_backward(dy, x, "tanh"),
        _gated(_tanh_gelu, gate_first=False),
    ),
}
