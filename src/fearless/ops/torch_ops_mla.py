"""DeepSeek's multi-head latent attention as torch operators: `torch.ops.fearless.mla`,
`mla_decoding` and `mla_decoding_split_kv` (ops/attention_mla.py), with their fake kernels,
forward only (an input that requires grad is refused at the call, as ops/torch_ops.py's
attention forwards). torch_library.py imports it right after ops/torch_ops.py, whose helpers
(`_define`, `_forward_only`) it uses.
"""

from typing import Optional

import torch
from torch import Tensor

import fearless.ops.attention_mla as MLA

from .torch_ops import _define, _forward_only, _like_first, _new, _no_backward


@_define("mla", _like_first)
def mla(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    qpe: Tensor,
    kpe: Tensor,
    is_causal: bool,
    scaling: Optional[float] = None,  # noqa: UP045
) -> Tensor:
    """q (B, H, L, D) gives (B, H, L, D)."""
    return MLA.mla(q, k, v, qpe, kpe, is_causal, scaling)  # type: ignore[no-any-return]


def _decoding_fake(q: Tensor, *_: object, **__: object) -> tuple[Tensor, Tensor]:
    """q (B, H, D) gives o (B, H, D) and an f32 lse (B, H)."""
    return _new(q, q.shape), q.new_empty(tuple(q.shape[:2]), dtype=torch.float32)


@_define("mla_decoding", _decoding_fake)
def mla_decoding(
    q: Tensor,
    qpe: Tensor,
    kv: Tensor,
    kpe: Tensor,
    sm_scale: Optional[float] = None,  # noqa: UP045
    transpose: bool = True,
) -> tuple[Tensor, Tensor]:
    return MLA.mla_decoding(q, qpe, kv, kpe, sm_scale, transpose)  # type: ignore[no-any-return]


@_define("mla_decoding_split_kv", _like_first)
def mla_decoding_split_kv(
    q: Tensor,
    qpe: Tensor,
    kv: Tensor,
    kpe: Tensor,
    sm_scale: Optional[float] = None,  # noqa: UP045
    kv_len_per_split: Optional[int] = None,  # noqa: UP045
) -> Tensor:
    return MLA.mla_decoding_split_kv(  # type: ignore[no-any-return]
        q, qpe, kv, kpe, sm_scale, kv_len_per_split
    )


for _op, _name in (
    (mla, "mla"),
    (mla_decoding, "mla_decoding"),
    (mla_decoding_split_kv, "mla_decoding_split_kv"),
):
    _op.register_autograd(_no_backward, setup_context=_forward_only(_name))
