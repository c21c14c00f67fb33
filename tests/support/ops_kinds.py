"""Every fearless.ops operator on every input kind, against NumPy references: the table the
CPU test (tests/test_ops_where.py, on the simulator) and the GPU test
(tests/gpu/test_ops_where_gpu.py, on the H200) share.

A case is a name, NumPy inputs, a call of the operator on inputs of one kind, and the NumPy
reference of its result(s). `as_kind` turns a NumPy array into an input of a kind: "numpy",
"fl" (an fl.Tensor), "torch_cpu" or "torch_cuda". The rule under test (ops/_io.py): the result
comes back in the kind and on the device of the first tensor argument, written, whatever the
target.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import fearless as fl
from fearless import ops

KINDS = ("numpy", "fl", "torch_cpu", "torch_cuda")


def as_kind(x: np.ndarray, kind: str) -> Any:
    """`x` as an input of `kind` (a fresh copy, so that no case sees another's writes)."""
    if kind == "numpy":
        return x.copy()
    if kind == "fl":
        return fl.asarray(x.copy())
    import torch

    t = torch.from_numpy(x.copy())
    return t.cuda() if kind == "torch_cuda" else t


def to_numpy(y: Any) -> np.ndarray:
    """A result of any kind as a NumPy array (f32 for the floats)."""
    if isinstance(y, fl.Tensor):
        y = y.numpy()
    if not isinstance(y, np.ndarray):
        y = y.detach().cpu().float().numpy()
    return np.asarray(y, np.float32)


def check_kind(y: Any, kind: str) -> None:
    """The result is the first argument's kind, on its device."""
    if kind in ("numpy", "fl"):
        assert isinstance(y, np.ndarray if kind == "numpy" else fl.Tensor), type(y)
        return
    import torch

    assert isinstance(y, torch.Tensor), type(y)
    assert y.device.type == ("cuda" if kind == "torch_cuda" else "cpu"), y.device


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.exp(-x))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    h = x.shape[-1] // 2
    return x * cos + np.concatenate([-x[..., h:], x[..., :h]], -1) * sin


def _sdpa(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    return _softmax(s) @ v


@dataclass(frozen=True)
class Case:
    name: str
    inputs: tuple[np.ndarray, ...]
    call: Callable[..., Any]  # the operator on the inputs, converted to one kind
    reference: Callable[..., Any]  # the same on the NumPy inputs (f64)
    tol: float = 2e-4
    leading: tuple[int, ...] = (0,)  # the inputs whose kind results take (group_gemm: each A)


def cases(seed: int = 0) -> list[Case]:
    """One case per operator, small enough for the simulator."""
    rng = np.random.default_rng(seed)

    def r(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    x, w, b = r(16, 200), r(200), r(200)
    a, bb = r(24, 40), r(40, 16)
    ang = r(6, 8)
    cos, sin = np.concatenate([np.cos(ang)] * 2, -1), np.concatenate([np.sin(ang)] * 2, -1)
    q, k, v = r(1, 2, 6, 16), r(1, 2, 6, 16), r(1, 2, 6, 16)
    return [
        Case("softmax", (x,), ops.softmax, _softmax),
        Case(
            "rms_norm",
            (x, w),
            lambda x, w: ops.rms_norm(x, (200,), w, 1e-6),
            lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w,
        ),
        Case(
            "layer_norm",
            (x, w, b),
            lambda x, w, b: ops.layer_norm(x, (200,), w, b),
            lambda x, w, b: (
                (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b
            ),
        ),
        Case("matmul", (a, bb), ops.matmul, lambda a, b: a @ b),
        Case("bmm", (r(3, 8, 16), r(3, 16, 8)), ops.bmm, lambda a, b: a @ b),
        Case(
            "group_gemm",
            (a, bb, r(8, 40), r(40, 24)),
            lambda a0, b0, a1, b1: ops.group_gemm([a0, a1], [b0, b1]),
            lambda a0, b0, a1, b1: [a0 @ b0, a1 @ b1],
            leading=(0, 2),
        ),
        Case("relu", (x,), ops.relu, lambda x: np.maximum(x, 0)),
        Case("gelu", (x,), ops.gelu, _gelu),
        Case("silu_and_mul", (x,), ops.silu_and_mul, lambda x: _silu(x[:, :100]) * x[:, 100:]),
        Case("swiglu", (x, w[None].repeat(16, 0)), ops.swiglu, lambda a, b: _silu(a) * b),
        Case("geglu", (x,), ops.geglu, lambda x: x[:, :100] * _gelu(x[:, 100:])),
        Case(
            "dropout",
            (x,),
            lambda x: ops.dropout(x, 0.0),
            lambda x: x,
        ),
        Case(
            "rope",
            (q, k, cos, sin),
            ops.rope,
            lambda q, k, c, s: [_rope(q, c, s), _rope(k, c, s)],
            leading=(0, 1),
        ),
        Case("transpose", (a,), ops.transpose, lambda a: a.T),
        Case(
            "scaled_dot_product_attention",
            (q, k, v),
            lambda q, k, v: ops.scaled_dot_product_attention(q, k, v, is_causal=True),
            lambda q, k, v: _sdpa(q, k, v, True),
            tol=1e-3,
        ),
    ]


def run_case(case: Case, kind: str, mixed: bool = False) -> None:
    """Run `case` with its first input of `kind` (and, `mixed`, the others as NumPy), check the
    result's kind, device and values against the reference."""
    args = [
        as_kind(t, kind if i in case.leading or not mixed else "numpy")
        for i, t in enumerate(case.inputs)
    ]
    got = case.call(*args)
    want = case.reference(*(t.astype(np.float64) for t in case.inputs))
    got_list = list(got) if isinstance(got, (list, tuple)) else [got]
    want_list = want if isinstance(want, list) else [want]
    assert len(got_list) == len(want_list)
    for g, w_ in zip(got_list, want_list, strict=True):
        check_kind(g, kind)
        np.testing.assert_allclose(to_numpy(g), w_, rtol=case.tol, atol=case.tol)
