"""What fearless.transformers puts into Hugging Face's Qwen3-Next besides the Qwen3-like parts:
its gated-delta-rule functions (`torch_chunk_gated_delta_rule`, `torch_recurrent_gated_delta_rule`)
on `fearless.ops.chunk_gated_delta_rule` and `recurrent_gated_delta_rule`, and the forward of
its gated RMSNorm (`Qwen3NextRMSNormGated`) on `rms_norm` and `swiglu`; each falls back to
Hugging Face's code for an input the op does not take (said at each check).

Hugging Face's functions and the ops mean the same (ops/delta_rule.py): q, k (B, T, H, K), v
(B, T, HV, V), value head hv reading q/k head hv // (HV / H) (Hugging Face's repeat_interleave),
g the log decay and beta the update gate (B, T, HV), q and k scaled by rsqrt(sum x^2 + 1e-6)
when use_qk_l2norm_in_kernel (Hugging Face's l2norm, eps 1e-6), q by K^-0.5 always, the state
(B, HV, K, V) in f32, the output in q's dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .. import ops
from ..ops.delta_rule import CHUNK_SIZES
from .layers import _FLOATS, _SILU, _base_forward, stand_in, wants_grad


def _takes(q: Any, k: Any, v: Any, g: Any, beta: Any, state: Any, kwargs: dict[str, Any]) -> bool:
    """Whether the fearless op computes Hugging Face's result for these inputs."""
    tensors = [q, k, v, g, beta] + ([] if state is None else [state])
    return (
        # packed variable-length sequences (fla's cu_seqlens): Hugging Face's torch code
        # ignores them too, the fearless kernels have no such layout
        kwargs.get("cu_seqlens") is None
        and all(isinstance(t, torch.Tensor) for t in tensors)
        and q.dim() == k.dim() == v.dim() == 4
        and q.dtype in _FLOATS
        and q.dtype == k.dtype == v.dtype
        and all(t.dtype in _FLOATS for t in (g, beta) + (() if state is None else (state,)))
        and q.shape[1] > 0  # an empty chunked part (all steps kept as states): nothing to do
        # the ops are forward only
        and not wants_grad(*tensors)
    )


def _options(
    initial_state: torch.Tensor | None,
    output_final_state: bool,
    use_qk_l2norm_in_kernel: bool,
    **extra: Any,
) -> dict[str, Any]:
    """The keyword arguments Hugging Face's two functions share (and `extra`), by the names the
    ops take too."""
    return {
        "initial_state": initial_state,
        "output_final_state": output_final_state,
        "use_qk_l2norm_in_kernel": use_qk_l2norm_in_kernel,
        **extra,
    }


def _gated_delta_rule(
    op: Callable[..., Any],
    original: Callable[..., Any],
    fits: bool,
    tensors: tuple[torch.Tensor, ...],
    options: dict[str, Any],
    kwargs: dict[str, Any],
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`op` (a fearless gated-delta-rule op) on `tensors` (query, key, value, g, beta) and its
    keyword `options` where it computes Hugging Face's result (`_takes`, and `fits`: the op's
    own conditions), else Hugging Face's `original` on the same arguments and `kwargs`."""
    query, key, value, g, beta = tensors
    if not (_takes(query, key, value, g, beta, options["initial_state"], kwargs) and fits):
        return original(query, key, value, g=g, beta=beta, **options, **kwargs)  # type: ignore[no-any-return]
    flags = ("output_final_state", "use_qk_l2norm_in_kernel")
    out, state = op(*tensors, **{**options, **{name: bool(options[name]) for name in flags}})
    return out, state


@stand_in
def chunk_function(original: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in for `torch_chunk_gated_delta_rule` on `fearless.ops.chunk_gated_delta_rule`
    (chunk_size 16 to 128, Hugging Face's 64), `original` for the rest."""

    def torch_chunk_gated_delta_rule(
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        g: torch.Tensor,
        beta: torch.Tensor,
        chunk_size: int = 64,
        initial_state: torch.Tensor | None = None,
        output_final_state: bool = False,
        use_qk_l2norm_in_kernel: bool = False,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        fits = chunk_size in CHUNK_SIZES and not isinstance(chunk_size, bool)
        options = _options(
            initial_state, output_final_state, use_qk_l2norm_in_kernel, chunk_size=chunk_size
        )
        tensors = (query, key, value, g, beta)
        op = ops.chunk_gated_delta_rule
        return _gated_delta_rule(op, original, fits, tensors, options, kwargs)

    return torch_chunk_gated_delta_rule


@stand_in
def recurrent_function(original: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in for `torch_recurrent_gated_delta_rule` (a cached decode step, or the steps
    whose states are kept) on `fearless.ops.recurrent_gated_delta_rule`, `original` for the
    rest."""

    def torch_recurrent_gated_delta_rule(
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        g: torch.Tensor,
        beta: torch.Tensor,
        initial_state: torch.Tensor | None = None,
        output_final_state: bool = False,
        use_qk_l2norm_in_kernel: bool = False,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        options = _options(initial_state, output_final_state, use_qk_l2norm_in_kernel)
        tensors = (query, key, value, g, beta)
        op = ops.recurrent_gated_delta_rule
        return _gated_delta_rule(op, original, True, tensors, options, kwargs)

    return torch_recurrent_gated_delta_rule


def gated_rms_norm_forward(self: Any, hidden_states: torch.Tensor, gate: torch.Tensor) -> Any:
    """`Qwen3NextRMSNormGated.forward`: weight * normalize(x) (cast back to x's dtype before
    the weight, Llama's form) times silu(gate), as `fearless.ops.rms_norm` then
    `fearless.ops.swiglu(gate, normed)` (silu(a) * b); another activation, or a weight or gate
    in another dtype than x, runs Hugging Face's code."""
    w = self.weight
    x = hidden_states
    takes = (
        getattr(self, "activation", None) in _SILU
        and x.dtype in _FLOATS
        and w.dtype == x.dtype == gate.dtype
        and gate.shape == x.shape
    )
    if not takes:
        return _base_forward(self, hidden_states, gate)
    normed = ops.rms_norm(x, (w.shape[0],), w, self.variance_epsilon)
    return ops.swiglu(gate, normed)
