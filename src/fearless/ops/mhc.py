"""TileGym's experimental mHC operators (DESIGN 2c), the manifold-constrained hyper-connections
of DeepSeek's mHC: `mhc_gemm_rms_scale`, `mhc_apply_residual` and `mhc_sinkhorn`, on the kernels
of ops/kernels_mhc.py. Forward only.

What they compute (TileGym's tilegym/ops/ops.py signatures, cutile/experimental/mhc.py and
tests/ops/experimental/test_mhc.py), with n the expansion factor and the columns of y (width
n^2 + 2n) holding H_pre in [0, n), H_post in [n, 2n) and H_res (n x n, row-major) from 2n:

- `mhc_gemm_rms_scale(x, w, n, alpha_pre, alpha_post, alpha_res, bias)`: x (M, K), w (K, N),
  bias (N,), N >= 2n. r = sqrt(mean(x^2)) per row (no eps), (M, 1) f32; y = x @ w * alpha / r +
  bias in bias's dtype, alpha = alpha_pre on columns [0, n), alpha_post on [n, 2n), alpha_res
  after; then sigmoid on [0, n) and 2 sigmoid on [n, 2n). The product is in tf32 where x or w
  is f32 (TileGym's), else in x's dtype; f32 sums. Returns (y, r).
- `mhc_apply_residual(x, f_out, y, n)`: x (B, n C), f_out (B, C), y (B, >= n^2 + 2n): returns
  H_res @ x.view(B, n, C) + H_post[:, :, None] * f_out[:, None], as (B, n C) in x's dtype.
  Computed in f32 (TileGym: in x's dtype when x, f_out and y are all 16-bit); any C (TileGym's
  needs C % 1024 == 0).
- `mhc_sinkhorn(y, n)`: y (M, >= n^2 + 2n): the n x n block of each row from column 2n becomes
  exp of itself normalised by rows then by columns, 20 times (f32), written into y in place
  (also a NumPy array, fl.Tensor or non-contiguous torch tensor: _io.write_back); returns y.
"""

from __future__ import annotations

from typing import Any

from .. import dtypes
from ..errors import KernelTypeError
from ..runtime.location import argument_error
from ._arguments import integer
from ._io import FLOATS, number, operand, output, refuse_grad, result, view, write_back
from ._replay import replayable
from ._route import clean_op_errors, torch_ops
from .kernels_mhc import mhc_apply_residual_tuned, mhc_gemm_rms_scale_tuned, mhc_sinkhorn_tuned


@replayable()
def mhc_gemm_rms_scale(
    x: Any,
    w: Any,
    n: int,
    alpha_pre: float,
    alpha_post: float,
    alpha_res: float,
    bias: Any,
) -> tuple[Any, Any]:
    """TileGym's `mhc_gemm_rms_scale`: (y, r) with r = sqrt(mean(x^2)) per row (M, 1) f32 and
    y = x @ w * alpha / r + bias in bias's dtype, sigmoid on columns [0, n), 2 sigmoid on
    [n, 2n) (alpha: alpha_pre, alpha_post, then alpha_res). Forward only."""
    op = "mhc_gemm_rms_scale"
    n = _expansion(n, op)
    alphas = tuple(
        number(v, op, name)
        for v, name in (
            (alpha_pre, "alpha_pre"),
            (alpha_post, "alpha_post"),
            (alpha_res, "alpha_res"),
        )
    )
    if (t := torch_ops(x, w, bias)) is not None:
        return tuple(t.mhc_gemm_rms_scale(x, w, n, *alphas, bias))  # type: ignore[return-value]
    a = operand(x, op, "x", FLOATS)
    dev = a.tensor.device
    b = operand(w, op, "w", FLOATS, device=dev)
    c = operand(bias, op, "bias", FLOATS, device=dev)
    if (
        len(a.shape) != 2
        or len(b.shape) != 2
        or a.shape[1] != b.shape[0]
        or c.shape != (b.shape[1:] if len(b.shape) == 2 else ())
    ):
        raise _mismatch(op, "x (M, K), w (K, N) and bias (N,)", a, b, c)
    (m, k), nn = a.shape, b.shape[1]
    if 2 * n > nn:
        raise argument_error(
            f"`fearless.ops.{op}` needs N >= 2n columns (H_pre and H_post), got N = {nn} with "
            f"n = {n}",
            help="w's columns are n (pre) + n (post) + n*n (res): N = n*n + 2*n",
        )
    if k == 0:
        raise argument_error(
            f"`x` of `fearless.ops.{op}` has no columns (K = 0): its RMS would be 0 / 0",
            help="x is the flattened residual stream (M, n*C), C >= 1",
        )
    y, y_ret = output(a, (m, nn), c.dtype)
    r, r_ret = output(a, (m, 1), dtypes.f32)
    if m:
        mhc_gemm_rms_scale_tuned(a.tensor, b.tensor, c.tensor, n, alphas, y, r)
    return result(a, y, y_ret), result(a, r, r_ret)


@replayable()
def mhc_apply_residual(x: Any, f_out: Any, y: Any, n: int) -> Any:
    """TileGym's `mhc_apply_residual`: H_res @ x.view(B, n, C) + H_post[..., None] * f_out[:,
    None] as (B, n C) in x's dtype, H_post = y[:, n:2n], H_res = y[:, 2n:2n + n^2] as (n, n).
    Forward only."""
    op = "mhc_apply_residual"
    n = _expansion(n, op)
    if (t := torch_ops(x, f_out, y)) is not None:
        return t.mhc_apply_residual(x, f_out, y, n)
    a = operand(x, op, "x", FLOATS)
    dev = a.tensor.device
    f = operand(f_out, op, "f_out", FLOATS, device=dev)
    h = operand(y, op, "y", FLOATS, device=dev)
    if len(a.shape) != 2 or len(f.shape) != 2 or len(h.shape) != 2:
        raise _mismatch(op, "x (B, n*C), f_out (B, C) and y (B, n*n + 2*n)", a, f, h)
    bsz, c = f.shape
    if a.shape != (bsz, n * c) or h.shape[0] != bsz or h.shape[1] < n * n + 2 * n:
        raise _mismatch(op, f"x (B, n*C), f_out (B, C) and y (B, n*n + 2*n) with n = {n}", a, f, h)
    out, ret = output(a, a.shape)
    if a.tensor.size:
        x3, o3 = view(a.tensor, (bsz, n, c)), view(out, (bsz, n, c))
        mhc_apply_residual_tuned(x3, f.tensor, h.tensor, o3)
    return result(a, out, ret)


@clean_op_errors
def mhc_sinkhorn(y: Any, n: int) -> Any:
    """TileGym's `mhc_sinkhorn`: each row's n x n block of y from column 2n becomes exp of
    itself normalised by rows then columns, 20 times, written in place; returns y. Forward
    only."""
    op = "mhc_sinkhorn"
    refuse_grad(op, y=y)
    n = _expansion(n, op)
    if (t := torch_ops(y)) is not None:
        t.mhc_sinkhorn(y, n)
        return y
    h = operand(y, op, "y", FLOATS, written=True)
    if len(h.shape) != 2 or h.shape[1] < n * n + 2 * n:
        raise argument_error(
            f"`y` of `fearless.ops.{op}` must be (M, n*n + 2*n) or wider, {n * n + 2 * n} "
            f"columns for n = {n}, got shape {h.shape}",
            help="y holds H_pre (n), H_post (n) and H_res (n*n) per row",
        )
    if h.shape[0]:
        mhc_sinkhorn_tuned(h.tensor, n)
    write_back(h)
    return y


def _expansion(n: Any, op: str) -> int:
    """The expansion factor n as an int >= 1, or E0701."""
    value = integer(
        n,
        op,
        "n",
        "an int (the expansion factor)",
        help="pass the number of residual streams, e.g. `n=4`",
    )
    if value < 1:
        raise argument_error(f"`n` of `fearless.ops.{op}` must be 1 or more, got {value}")
    return value


def _mismatch(op: str, wants: str, *got: Any) -> KernelTypeError:
    shapes = ", ".join(str(g.shape) for g in got)
    return argument_error(f"`fearless.ops.{op}` needs {wants}, got shapes {shapes}")
