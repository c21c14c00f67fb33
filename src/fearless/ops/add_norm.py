"""Liger-Kernel's (and vLLM's) fused residual add + RMS norm, `fearless.ops.fused_add_rms_norm`,
on the kernel of ops/kernels_rows.py.

A pre-norm decoder layer adds a sublayer's output to the residual stream and normalises the sum
for the next sublayer: `s = x + residual; y = rms_norm(s) * weight`. Fused, the sum is read and
written once and one launch replaces two. x and residual (..., n) of one float dtype (f32, f16,
bf16), weight (n,) in any of those (None: ones); s is stored in their dtype and normalised as
stored, so (y, s) are what torch's unfused add then `rms_norm` give, up to the norm's own
rounding; `eps` None is the dtype's machine epsilon, as torch's rms_norm. Returns (y, s), as
Liger's LigerFusedAddRMSNorm (vLLM's op writes the same two into its arguments instead). Torch
tensors that require grad get gradients through torch autograd (ops/torch_ops_tilegym.py:
rms_norm's backward on s, and s's gradient passed to x and residual).
"""

from __future__ import annotations

from typing import Any

from ..runtime.location import argument_error
from ._io import FLOATS, machine_eps, number, operand, output, param, result, rows_of
from ._replay import replayable
from ._route import torch_ops
from .kernels_rows import add_rms_norm_tuned

OP = "fused_add_rms_norm"


@replayable()
def fused_add_rms_norm(
    x: Any, residual: Any, weight: Any = None, eps: float | None = None
) -> tuple[Any, Any]:
    """(rms_norm(x + residual) * weight, x + residual) over the last axis, the sum in x's dtype;
    `eps` None is the dtype's machine epsilon."""
    if (t := torch_ops(x, residual, weight)) is not None:
        e = None if eps is None else number(eps, OP, "eps")
        return t.fused_add_rms_norm(x, residual, weight, e)  # type: ignore[no-any-return]
    a = operand(x, OP, "x", FLOATS)
    r = operand(residual, OP, "residual", FLOATS, device=a.tensor.device)
    if r.dtype != a.dtype or r.shape != a.shape:
        raise argument_error(
            f"`fearless.ops.{OP}` adds `x` and `residual` of one shape and dtype, got "
            f"{a.shape} {a.dtype.name} and {r.shape} {r.dtype.name}",
            help="pass the residual stream as it is (the same shape as x), converted to x's dtype",
        )
    if not a.shape:
        raise argument_error(
            f"`fearless.ops.{OP}` normalizes over the last axis, and `x` has none (0-d)",
            help="pass x of shape (..., hidden)",
        )
    n = a.shape[-1]
    w = param(weight, n, a, OP, "weight", 1.0)
    e = number(eps, OP, "eps") if eps is not None else machine_eps(a)
    y, y_ret = output(a, a.shape)
    s, s_ret = output(a, a.shape)
    if a.tensor.size:
        x2, r2 = rows_of(a.tensor, -1, OP), rows_of(r.tensor, -1, OP)
        add_rms_norm_tuned(x2, r2, w, e, rows_of(y, -1, OP), rows_of(s, -1, OP))
    return result(a, y, y_ret), result(a, s, s_ret)
