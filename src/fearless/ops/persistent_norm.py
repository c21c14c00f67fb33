"""TileGym's `persistent_layer_norm` (DESIGN 2c): layer norm over the last axis whose blocks
walk the rows persistently, returning TileGym's five values, on the kernel of
ops/kernels_persistent_norm.py.

What it takes (TileGym's tilegym/ops/ops.py signature, cutile layer_norm_legacy.py and
tests/ops/test_layer_norm_legacy.py::Test_PersistentLayerNorm): input (..., D) of f32, f16 or
bf16 (rows: every axis but the last); normalized_shape, unused (TileGym's); weight and bias
(D,), any of those dtypes, used in the input's (None: ones, zeros); eps; mean and rstd, f32
(rows,), both or neither: given, the rows are normalised with them and not computed. It returns
(y, mean, rstd, BLOCK_D, num_warps): y in the input's shape and dtype (TileGym's cuTile kernel
rounds y through bf16 whatever the dtype; ours does not), mean and rstd f32 (rows,) (the given
ones when given), BLOCK_D the tile's width (D rounded up to a power of two) and num_warps 8,
the constant TileGym returns. The variance is ops.layer_norm's, centred (TileGym's kernel:
E[x^2] - mean^2). Forward only.
"""

from __future__ import annotations

import math
from typing import Any

from .. import dtypes
from ..runtime.location import argument_error
from ._arguments import shape_of
from ._io import FLOATS, cast, filled_output, number, operand, output, param, result, view
from ._replay import replayable
from ._route import torch_ops
from .kernels_persistent_norm import block_d, persistent_layer_norm_tuned

OP = "persistent_layer_norm"
NUM_WARPS = 8  # TileGym's returned constant (tileiras chooses the warps here)


@replayable()
def persistent_layer_norm(
    input: Any,
    normalized_shape: Any,
    weight: Any,
    bias: Any,
    eps: float,
    mean: Any = None,
    rstd: Any = None,
) -> tuple[Any, Any, Any, int, int]:
    """TileGym's `persistent_layer_norm`: (layer_norm(input) * weight + bias over the last
    axis, each row's mean, each row's rstd, BLOCK_D, num_warps); `mean` and `rstd` given (both)
    are used instead of computed. Forward only."""
    eps = number(eps, OP, "eps")
    if (mean is None) != (rstd is None):
        raise argument_error(
            f"`fearless.ops.{OP}` takes mean and rstd both or neither, got only "
            f"{'mean' if rstd is None else 'rstd'}",
            help="pass both (precomputed statistics) or neither (computed and returned)",
        )
    d = _last(input)
    if (t := torch_ops(input, weight, bias, mean, rstd)) is not None:
        y, m, r = t.persistent_layer_norm(input, weight, bias, eps, mean, rstd)
        if mean is not None:
            m, r = mean, rstd
        return y, m, r, block_d(d), NUM_WARPS
    a = operand(input, OP, "input", FLOATS)
    dev = a.tensor.device
    if not a.shape:
        raise argument_error(f"`input` of `fearless.ops.{OP}` must have an axis, got a 0-d tensor")
    n = a.shape[-1]
    rows = math.prod(a.shape[:-1])  # one statistic a row, rows of no columns too
    w = param(weight, n, a, OP, "weight", 1.0)
    b = param(bias, n, a, OP, "bias", 0.0)
    y, y_ret = output(a, a.shape)
    given = mean is not None
    if given:
        ms = [
            operand(s, OP, name, FLOATS, device=dev) for s, name in ((mean, "mean"), (rstd, "rstd"))
        ]
        for s, name in zip(ms, ("mean", "rstd"), strict=True):
            if s.shape != (rows,):
                raise argument_error(
                    f"`{name}` of `fearless.ops.{OP}` must have shape ({rows},), one value per "
                    f"row of input {a.shape}, got {s.shape}",
                )
        m_t, r_t = (cast(s, dtypes.f32) for s in ms)
        m_ret, r_ret = mean, rstd
    elif n == 0:  # no column to reduce, no kernel: torch's native_layer_norm's mean 0, rstd NaN
        m_t, m_ret = filled_output(a, (rows,), 0.0, dtypes.f32)
        r_t, r_ret = filled_output(a, (rows,), math.nan, dtypes.f32)
    else:
        m_t, m_ret = output(a, (rows,), dtypes.f32)
        r_t, r_ret = output(a, (rows,), dtypes.f32)
    if a.tensor.size:
        x2, y2 = view(a.tensor, (rows, n)), view(y, (rows, n))
        persistent_layer_norm_tuned(x2, w, b, eps, y2, m_t, r_t, given)
    if not given:
        m_ret, r_ret = result(a, m_t, m_ret), result(a, r_t, r_ret)
    return result(a, y, y_ret), m_ret, r_ret, block_d(n), NUM_WARPS


def _last(x: Any) -> int:
    shape = shape_of(x)
    return shape[-1] if shape else 1
