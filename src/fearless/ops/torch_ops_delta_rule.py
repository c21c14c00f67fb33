"""The gated delta rule as torch operators: `torch.ops.fearless.recurrent_gated_delta_rule`
and `torch.ops.fearless.chunk_gated_delta_rule` (ops/delta_rule.py), with fake kernels for
torch.compile and torch.export, forward only (an input that requires grad is refused at the
call). Registered with the others of ops/torch_ops.py, whose helpers it uses, when
torch_library.py registers fearless.ops.

A torch operator returns tensors only: the final state is an empty (0,) f32 tensor where
output_final_state is False, and the Python operators give None there, as TileGym's.
"""

from typing import Optional

import torch
from torch import Tensor

import fearless.ops.delta_rule as DR

from .torch_ops import _define, _forward_only, _new, _no_backward


def _outputs(query: Tensor, value: Tensor, final: bool) -> tuple[Tensor, Tensor]:
    """output (B, T, HV, V) in the query's dtype; the final state (B, HV, K, V) f32 when
    `final`, else (0,)."""
    b, t, _, k = query.shape
    hv, v = value.shape[2:]
    state = (b, hv, k, v) if final else (0,)
    return _new(query, (b, t, hv, v)), query.new_empty(state, dtype=torch.float32)


def _recurrent_fake(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    g: Tensor,
    beta: Tensor,
    initial_state: Optional[Tensor] = None,  # noqa: UP045
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
) -> tuple[Tensor, Tensor]:
    return _outputs(query, value, output_final_state)


def _chunk_fake(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    g: Tensor,
    beta: Tensor,
    chunk_size: int = 64,
    initial_state: Optional[Tensor] = None,  # noqa: UP045
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
) -> tuple[Tensor, Tensor]:
    return _outputs(query, value, output_final_state)


def _state(query: Tensor, state: Optional[Tensor]) -> Tensor:  # noqa: UP045
    return query.new_empty((0,), dtype=torch.float32) if state is None else state


@_define("recurrent_gated_delta_rule", _recurrent_fake)
def recurrent_gated_delta_rule(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    g: Tensor,
    beta: Tensor,
    initial_state: Optional[Tensor] = None,  # noqa: UP045
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
) -> tuple[Tensor, Tensor]:
    out, state = DR.recurrent_gated_delta_rule(
        query, key, value, g, beta, initial_state, output_final_state, use_qk_l2norm_in_kernel
    )
    return out, _state(query, state)


@_define("chunk_gated_delta_rule", _chunk_fake)
def chunk_gated_delta_rule(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    g: Tensor,
    beta: Tensor,
    chunk_size: int = 64,
    initial_state: Optional[Tensor] = None,  # noqa: UP045
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
) -> tuple[Tensor, Tensor]:
    out, state = DR.chunk_gated_delta_rule(
        query,
        key,
        value,
        g,
        beta,
        chunk_size,
        initial_state,
        output_final_state,
        use_qk_l2norm_in_kernel,
    )
    return out, _state(query, state)


for _op, _name in (
    (recurrent_gated_delta_rule, "recurrent_gated_delta_rule"),
    (chunk_gated_delta_rule, "chunk_gated_delta_rule"),
):
    _op.register_autograd(_no_backward, setup_context=_forward_only(_name))
