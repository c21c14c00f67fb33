"""TileGym's fused GLU MLP: `fearless.ops.linear_gluact_linear`, on the kernels of
ops/kernels_gluact.py.

What it takes (TileGym 1.5.1's `linear_gluact_linear`, tilegym/ops/ops.py, and its cuTile
implementation, tilegym/ops/cutile/linear_gluact_linear.py; Olmo3's fused MLP calls it):
  - input (*, in_features);
  - weight_act and weight_noact (out_features, in_features), one shape (nn.Linear's layout:
    the gate and up projections);
  - weight2 (final_features, out_features) (the down projection);
  - act_type 'silu' (the default), 'relu', 'gelu' or 'gelu-tanh';
all four tensors of one dtype, f32, f16 or bf16.
It returns (*, final_features) in that dtype: act(input @ weight_act^T) * (input @
weight_noact^T) @ weight2^T, every product summed in f32, the gated intermediate rounded once
to the dtype before the second layer (TileGym stores it in the dtype). 'gelu' is the tanh
approximation, as in TileGym, whose kernel maps 'gelu' and 'gelu-tanh' to one activation.
`kernel_configs` (TileGym's only keyword) is accepted and ignored, as TileGym's autotuned
default path ignores it: the autotuner picks the tiles. Shapes that do not match, other
dtypes, another act_type or keyword are refused (E0701) with what was expected. Forward only
(TileGym has no backward): an input that requires grad is refused at the call
(ops/torch_ops_tilegym.py), never detached.
"""

from __future__ import annotations

import math
from typing import Any

from ..runtime.location import argument_error
from ._arguments import one_of
from ._io import FLOATS, Operand, empty_beside, operand, output, result, view, zeros_output
from ._replay import replayable
from ._route import torch_ops
from .kernels_gluact import gluact_tuned

OP = "linear_gluact_linear"
ACT_TYPES = {"silu": "silu", "relu": "relu", "gelu": "gelu_tanh", "gelu-tanh": "gelu_tanh"}


@replayable()
def linear_gluact_linear(
    input: Any,
    weight_act: Any,
    weight_noact: Any,
    weight2: Any,
    act_type: str = "silu",
    **kwargs: Any,
) -> Any:
    """TileGym's `linear_gluact_linear`: act(input @ weight_act^T) * (input @ weight_noact^T)
    @ weight2^T for input (*, in_features), weight_act and weight_noact (out_features,
    in_features) and weight2 (final_features, out_features), summed in f32; returns (*,
    final_features) in the input's dtype. act_type: 'silu', 'relu', 'gelu' or 'gelu-tanh'
    (both tanh-approximated, as TileGym's). Forward only."""
    act = _act(act_type)
    _kwargs(kwargs)
    if (t := torch_ops(input, weight_act, weight_noact, weight2)) is not None:
        return t.linear_gluact_linear(input, weight_act, weight_noact, weight2, act_type)
    x = operand(input, OP, "input", FLOATS)
    dev = x.tensor.device
    wa = operand(weight_act, OP, "weight_act", FLOATS, device=dev)
    wn = operand(weight_noact, OP, "weight_noact", FLOATS, device=dev)
    w2 = operand(weight2, OP, "weight2", FLOATS, device=dev)
    m, k, i, n = _check(x, wa, wn, w2)
    lead = x.shape[:-1]
    if m * n == 0 or k * i == 0:  # empty, or a sum over nothing
        return result(x, *zeros_output(x, (*lead, n)))
    out, ret = output(x, (*lead, n))
    x2 = view(x.tensor, (m, k))
    gluact_tuned(
        act, x2, wa.tensor, wn.tensor, w2.tensor, view(out, (m, n)),
        lambda: empty_beside(x2, (m, i), x.dtype),
    )  # fmt: skip
    return result(x, out, ret)


def _act(act_type: Any) -> str:
    """The kernels' name of `act_type`; E0701 for any other."""
    wants = "'silu', 'relu', 'gelu' or 'gelu-tanh'"
    hint = "pass e.g. `act_type='silu'` (SwiGLU, the default)"
    return ACT_TYPES[one_of(act_type, ACT_TYPES, OP, "act_type", wants, hint)]


def _kwargs(kwargs: dict[str, Any]) -> None:
    """TileGym's one keyword, `kernel_configs`, is taken and ignored; E0701 for others."""
    unknown = sorted(set(kwargs) - {"kernel_configs"})
    if unknown:
        raise argument_error(
            f"`fearless.ops.{OP}` got an unexpected keyword `{unknown[0]}`",
            help="it takes input, weight_act, weight_noact, weight2, act_type and TileGym's "
            "kernel_configs (ignored: the autotuner picks the tiles)",
        )


def _check(x: Operand, wa: Operand, wn: Operand, w2: Operand) -> tuple[int, int, int, int]:
    """(M, K, I, N): the rows of input, in_features, out_features and final_features, once
    every shape and dtype matches; E0701 otherwise."""
    layout = (
        "input (*, in_features), weight_act and weight_noact (out_features, in_features), "
        "weight2 (final_features, out_features)"
    )
    hint = "the weights are nn.Linear's, (out, in): gate_proj, up_proj and down_proj"
    for name, w in (("weight_act", wa), ("weight_noact", wn), ("weight2", w2)):
        if w.dtype != x.dtype:
            raise argument_error(
                f"`fearless.ops.{OP}` needs its four tensors of one dtype, but `input` is "
                f"{x.dtype.name} and `{name}` is {w.dtype.name}",
                help=f"convert `{name}` to the input's dtype",
            )
    if len(x.shape) < 1 or len(wa.shape) != 2 or len(w2.shape) != 2:
        raise argument_error(
            f"`fearless.ops.{OP}` takes {layout}, got input {x.shape}, weight_act "
            f"{wa.shape} and weight2 {w2.shape}",
            help=hint,
        )
    k = x.shape[-1]
    i, n = wa.shape[0], w2.shape[0]
    if wa.shape[1] != k:
        raise argument_error(
            f"`weight_act` of `fearless.ops.{OP}` must be (out_features, {k}) (input's last "
            f"axis is in_features), got {wa.shape}",
            help=hint,
        )
    if wn.shape != wa.shape:
        raise argument_error(
            f"`weight_noact` of `fearless.ops.{OP}` must have weight_act's shape {wa.shape}, "
            f"got {wn.shape}",
            help=hint,
        )
    if w2.shape[1] != i:
        raise argument_error(
            f"`weight2` of `fearless.ops.{OP}` must be (final_features, {i}) (weight_act's "
            f"out_features), got {w2.shape}",
            help=hint,
        )
    return math.prod(x.shape[:-1]), k, i, n
