"""The backward of fearless.ops' activations: given the gradient `dy` of an activation's output
and its input, the gradient of the input, as torch's autograd computes it.

`ops/torch_library.py` calls these from the backward formulas it registers; they are plain
operators too. Like the forward operators (ops/functional.py) each takes fl.Tensors, torch
tensors or NumPy arrays, returns the kind of its first argument (`dy`), computes in f32
whatever the dtype (f32, f16, bf16), and refuses what torch would (E0701): mismatched shapes or
dtypes. The kernels are in ops/kernels_activation_backward.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..runtime.location import argument_error
from ._io import FLOATS, Operand, gelu_kind, halves_of, operand, output, result, view
from ._replay import replayable
from .kernels_activation import elementwise_tuned
from .kernels_activation_backward import (
    gated_backward_tuned,
    make_unary_backward,
    swiglu_backward_tuned,
)
from .kernels_rows import kernel_of, size_class


@replayable()
def relu_backward(dy: Any, x: Any) -> Any:
    """dx of `relu(x)`: 0 where x <= 0, else dy (at x == 0 the gradient is 0 and at a NaN it
    is dy, as torch's)."""
    return _unary_backward(dy, x, "relu", "relu_backward")


@replayable()
def gelu_backward(dy: Any, x: Any, approximate: str = "none") -> Any:
    """dx of `gelu(x, approximate)`: dy * (Phi(x) + x * phi(x)) for the exact gelu, and the
    derivative of the tanh form for `approximate="tanh"` (torch's formulas)."""
    return _unary_backward(dy, x, gelu_kind(approximate), "gelu_backward")


@replayable()
def silu_and_mul_backward(dy: Any, x: Any) -> Any:
    """dx of `silu_and_mul(x)` = silu(x[..., :d]) * x[..., d:]: dx has x's shape, its gate half
    dy * up * silu'(gate), its up half dy * silu(gate)."""
    return _gated_backward(dy, x, "silu", "silu_and_mul_backward")


@replayable()
def geglu_backward(dy: Any, x: Any, approximate: str = "none", dim: int = -1) -> Any:
    """dx of `geglu(x, dim, approximate)` = a * gelu(b) for a, b the halves of `x` along `dim`,
    as `silu_and_mul_backward` with gelu's derivative."""
    return _gated_backward(dy, x, gelu_kind(approximate), "geglu_backward", dim)


@replayable()
def swiglu_backward(dy: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """(da, db) of `swiglu(a, b)` = silu(a) * b: da = dy * b * silu'(a), db = dy * silu(a)."""
    op = "swiglu_backward"
    g, x, y = _operands(op, ("dy", dy), ("a", a), ("b", b))
    for name, t in (("a", x), ("b", y)):
        _expect_shape(op, name, t, g.shape, "`dy`")
    da, da_ret = output(g, g.shape)
    db, db_ret = output(g, g.shape)
    if g.tensor.size:
        swiglu_backward_tuned(g.tensor, x.tensor, y.tensor, da, db, size_class(g.tensor.size))
    return result(g, da, da_ret), result(g, db, db_ret)


# --------------------------------------------------------------------------- helpers


def _unary_backward(dy: Any, x: Any, kind: str, op: str) -> Any:
    g, v = _operands(op, ("dy", dy), ("x", x))
    _expect_shape(op, "dy", g, v.shape, "`x`")
    dx, ret = output(g, g.shape)
    if g.tensor.size:
        kernel = kernel_of(make_unary_backward, kind, g.dtype)
        size = size_class(dx.size)
        elementwise_tuned(f"{kind}_backward", kernel, dx, (g.tensor, v.tensor), size)
    return result(g, dx, ret)


def _gated_backward(dy: Any, x: Any, kind: str, op: str, dim: int = -1) -> Any:
    g, v = _operands(op, ("dy", dy), ("x", x))
    x2, half = halves_of(v.tensor, dim, op)
    m, n2 = x2.shape
    d = n2 // 2
    _expect_shape(op, "dy", g, half, "the forward's output (half of `x`)")
    dx, ret = output(g, v.shape)
    if dx.size:
        gated_backward_tuned(
            kind, view(g.tensor, (m, 1, d)), view(x2, (m, 2, d)), view(dx, (m, 2, d))
        )
    return result(g, dx, ret)


def _operands(op: str, *named: tuple[str, Any]) -> list[Operand]:
    """The tensors of `op` as operands of one float dtype (the first's)."""
    ops_ = [operand(t, op, name, FLOATS) for name, t in named]
    for (name, _), o in zip(named[1:], ops_[1:], strict=True):
        if o.dtype != ops_[0].dtype:
            raise argument_error(
                f"`fearless.ops.{op}` needs `{named[0][0]}` and `{name}` of one dtype, got "
                f"{ops_[0].dtype.name} and {o.dtype.name}",
                help="convert one of them first",
            )
    return ops_


def _expect_shape(op: str, name: str, t: Operand, shape: tuple[int, ...], what: str) -> None:
    if t.shape != shape:
        raise argument_error(
            f"`{name}` of `fearless.ops.{op}` has shape {t.shape}, but {what} has {shape}",
            help="pass the gradient of the forward's output and the forward's inputs",
        )


__all__: Sequence[str] = (
    "geglu_backward",
    "gelu_backward",
    "relu_backward",
    "silu_and_mul_backward",
    "swiglu_backward",
)  # fmt: skip
