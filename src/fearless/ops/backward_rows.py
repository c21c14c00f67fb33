"""The backward of fearless.ops' row operators (softmax, rms_norm, layer_norm), for autograd.

Each function takes the tensor kinds the forward operators take (fl.Tensor, torch tensor,
NumPy array; ops/_io.py) and returns its gradients in the kind of its first tensor argument.
The math is f32 whatever the dtype; what the forwards do not save (rstd, mean) is recomputed
from x. The weight's and bias's gradients are deterministic sums over every row (the kernels
in ops/kernels_rows_backward.py add per-block partial sums, then one kernel adds those).
"""

from __future__ import annotations

from typing import Any

from ..autotune_ahead import compile_ahead_once
from ..runtime.location import argument_error
from ..runtime.tensor import Tensor
from ._io import FLOATS, Operand, cast, operand, output, param, result, rows_of
from ._replay import replayable
from .kernels_rows import rows_key
from .kernels_rows_backward import (
    column_sum,
    layer_norm_bwd_tuned,
    rms_norm_bwd_tuned,
    softmax_bwd_tuned,
)


@replayable()
def softmax_backward(y: Any, dy: Any, dim: int = -1) -> Any:
    """dx of `softmax(x, dim)` from its output `y` and the output's gradient `dy`:
    y * (dy - sum(dy * y)) over the last axis. Returns y's kind and dtype."""
    a = operand(y, "softmax_backward", "y", FLOATS)
    op = "softmax_backward"
    g = _like(operand(dy, op, "dy", FLOATS), a, op, "dy", "y")
    dx, ret = output(a, a.shape)
    y2, dy2, dx2 = rows_of(a.tensor, dim, op), rows_of(g, dim, op), rows_of(dx, dim, op)
    if a.tensor.size:
        softmax_bwd_tuned(y2, dy2, dx2)
    return result(a, dx, ret)


@replayable()
def rms_norm_backward(dy: Any, x: Any, weight: Any, eps: float) -> tuple[Any, Any]:
    """(dx, dw) of `torch.nn.functional.rms_norm(x, (n,), weight, eps)` over x's last axis
    (any leading shape), for the output's gradient `dy`. dw is the weight's gradient, in x's
    dtype (as dx), or None when `weight` is None. Returns dy's kind."""
    op = "rms_norm_backward"
    g, xa, dyt, x2, n = _norm_operands(dy, x, op)
    w = param(weight, n, xa, op, "weight", 1.0)
    dx, dx_ret = output(g, g.shape, xa.dtype)
    dw, dw_ret = output(g, (n,), xa.dtype) if weight is not None else (None, None)
    if n:
        dy2, dx2 = rows_of(dyt, -1, op), rows_of(dx, -1, op)

        def run() -> None:  # dx and the rows' partial sums, then dw's column sum
            sums = rms_norm_bwd_tuned(dy2, x2, w, float(eps), dx2)
            if dw is not None:
                column_sum(sums, 0, dw)

        compile_ahead_once((op, rows_key(x2), xa.dtype, dw is None), run)
        run()
    return result(g, dx, dx_ret), (result(g, dw, dw_ret) if dw is not None else None)


@replayable()
def layer_norm_backward(
    dy: Any, x: Any, weight: Any, bias: Any, eps: float
) -> tuple[Any, Any, Any]:
    """(dx, dw, db) of `torch.nn.functional.layer_norm(x, (n,), weight, bias, eps)` over x's
    last axis, for the output's gradient `dy`. dw is None when `weight` is None, db when
    `bias` is; all three are in x's dtype. Returns dy's kind."""
    op = "layer_norm_backward"
    g, xa, dyt, x2, n = _norm_operands(dy, x, op)
    w = param(weight, n, xa, op, "weight", 1.0)
    if bias is not None:
        param(bias, n, xa, op, "bias", 0.0)  # checked: db does not depend on its values
    dx, dx_ret = output(g, g.shape, xa.dtype)
    grads = [output(g, (n,), xa.dtype) if p is not None else (None, None) for p in (weight, bias)]
    if n:
        dy2, dx2 = rows_of(dyt, -1, op), rows_of(dx, -1, op)

        def run() -> None:  # dx and the rows' partial sums, then dw's and db's column sums
            sums = layer_norm_bwd_tuned(dy2, x2, w, float(eps), dx2)
            for p, (out, _) in enumerate(grads):
                if out is not None:
                    column_sum(sums, p, out)

        wanted = tuple(out is None for out, _ in grads)
        compile_ahead_once((op, rows_key(x2), xa.dtype, wanted), run)
        run()
    dw, db = (result(g, out, ret) if out is not None else None for out, ret in grads)
    return result(g, dx, dx_ret), dw, db


def _norm_operands(dy: Any, x: Any, op: str) -> tuple[Operand, Operand, Tensor, Tensor, int]:
    """A norm backward's operands: dy, x, dy in x's dtype, x as rows, the row length."""
    g = operand(dy, op, "dy", FLOATS)
    xa = operand(x, op, "x", FLOATS)
    x2 = rows_of(xa.tensor, -1, op)
    return g, xa, _like(g, xa, op, "dy", "x"), x2, x2.shape[1]


def _like(b: Operand, a: Operand, op: str, name: str, a_name: str) -> Tensor:
    """`b`'s tensor in `a`'s dtype, checked to have `a`'s shape."""
    if b.shape != a.shape:
        raise argument_error(
            f"`{name}` of `fearless.ops.{op}` has shape {b.shape}, but `{a_name}` has shape "
            f"{a.shape}: they must be one shape",
            help="pass the forward's input and the gradient of its output, of one shape",
        )
    return cast(b, a.dtype)
