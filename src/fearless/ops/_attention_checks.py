"""The argument checks that several attention operators share (ops/attention_variants.py,
attention_varlen.py, attention_mla.py; the scale also attention.py, attention_mla_sparse.py and
kvcache_attention.py): q, k, v of TileGym's (B, H, L, D) / (B, H_kv, S, D)
layout (one query token for a decode), a split-KV decode's `kv_len_per_split`, and the scores'
scale with its 1 / sqrt(D) default. Each raises E0701 at the caller's line with the operator's
name in its text.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import KernelTypeError
from ..runtime.location import argument_error
from ._io import FLOATS, Operand, number, operand


def qkv_operands(op: str, q: Any, k: Any, v: Any) -> tuple[Operand, Operand, Operand]:
    """q (B, H, L, D), k and v (B, H_kv, S, D) of one float dtype, H a multiple of H_kv."""
    qa = operand(q, op, "q", FLOATS)
    ka, va = (operand(x, op, n, FLOATS, device=qa.tensor.device) for x, n in ((k, "k"), (v, "v")))
    if not qa.dtype == ka.dtype == va.dtype:
        raise qkv_mismatch(op, f"dtypes {qa.dtype.name}, {ka.dtype.name} and {va.dtype.name}")
    if not len(qa.shape) == len(ka.shape) == len(va.shape) == 4:
        raise qkv_mismatch(op, f"shapes {qa.shape}, {ka.shape} and {va.shape}")
    (b, h, _, d), (bk, hk, _, dk) = qa.shape, ka.shape
    if bk != b or va.shape != ka.shape or dk != d or not hk or h % hk:
        raise qkv_mismatch(op, f"shapes {qa.shape}, {ka.shape} and {va.shape}")
    return qa, ka, va


def decode_operands(
    op: str, q: Any, k: Any, v: Any, prefill: str
) -> tuple[Operand, Operand, Operand]:
    """`qkv_operands` of a decode step: q holds one query token, (B, H, 1, D); `prefill` names
    the operator the error's help points to for several."""
    qa, ka, va = qkv_operands(op, q, k, v)
    if qa.shape[2] != 1:
        raise argument_error(
            f"`fearless.ops.{op}` takes one query token, q (B, H, 1, D), got shape {qa.shape}",
            help=f"for several query tokens call `fearless.ops.{prefill}`",
        )
    return qa, ka, va


def qkv_mismatch(op: str, what: str) -> KernelTypeError:
    """The E0701 of q, k, v (and their gradients) outside the (B, H, L, D) layout."""
    return argument_error(
        f"`fearless.ops.{op}` needs q (B, H, L, D) and k, v (B, H_kv, S, D) of one dtype, H a "
        f"multiple of H_kv, got {what}",
    )


def split_len(kv_len_per_split: Any, op: str, example: int = 1024) -> int | None:
    """A split-KV decode's keys per split: None (the split follows the batch and the GPU) or a
    power of two of 16 or more; `example` is the value the error's help suggests."""
    n = kv_len_per_split
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 16 or n & (n - 1)):
        raise argument_error(
            f"`fearless.ops.{op}` needs kv_len_per_split None or a power of two of 16 or more, "
            f"got {n!r:.40}",
            help="pass None (the default: the split follows the batch and the GPU), or e.g. "
            f"{example}",
        )
    return n  # type: ignore[no-any-return]


def attention_scale(value: Any, d: int, op: str, name: str) -> float:
    """The scores' scale: `value` (the argument called `name`, a number) or, for None,
    1 / sqrt(d), d the head dimension."""
    return 1.0 / math.sqrt(d) if value is None else number(value, op, name)
