"""The outputs that the attention operators make alike (ops/attention.py, attention_variants.py,
attention_varlen.py, attention_sinks.py): a forward's output, zeros where there are no keys; a
decode's q and output grouped per KV head for the split-KV kernels; a backward's gradients,
zeros where no query meets a key, and (dq, dk, dv) as it returns them, with the backward's
launch between (`qkv_backward`). Its one responsibility: allocating and returning those
tensors (the argument checks are ops/_attention_checks.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ._io import Operand, output, result, view, zeros_output


def attention_output(like: Operand, shape: tuple[int, ...], s_len: int) -> tuple[Any, Any]:
    """(out, returned) of a forward of `shape` in like's dtype and kind: zeros where there are
    no keys (`s_len` 0: every row is 0, no kernel runs), else for the kernels to write."""
    return output(like, shape) if s_len else zeros_output(like, shape)


def decode_views(q: Any, out: Any, shape: tuple[int, ...], hk: int) -> tuple[Any, Any]:
    """A decode's q and output of `shape` (B, H, 1, D) as the split-KV kernels read them:
    (B, H_kv, H / H_kv, D), each KV head's query heads together."""
    b, h, _, d = shape
    grouped = (b, hk, h // hk, d)
    return view(q, grouped), view(out, grouped)


def gradient_outputs(runs: bool, *like: Operand) -> list[tuple[Any, Any]]:
    """A backward's (grad, returned) per operand, of its shape, dtype and kind: for the kernels
    to write where the backward `runs`, else zeros (no query meets a key)."""
    return [output(x, x.shape) if runs else zeros_output(x, x.shape) for x in like]


def gradient_results(
    like: Sequence[Operand], grads: Sequence[tuple[Any, Any]]
) -> tuple[Any, Any, Any]:
    """(dq, dk, dv) as the backward returns them, each in the kind of its operand in `like`."""
    dq, dk, dv = (result(x, g, r) for x, (g, r) in zip(like, grads, strict=True))
    return dq, dk, dv


def qkv_backward(
    qa: Operand,
    ka: Operand,
    va: Operand,
    oa: Operand,
    ga: Operand,
    s: int,
    launch: Callable[[Any, Any, Any, Any, Any, Any, Any, Any], None],
) -> tuple[Any, Any, Any]:
    """A backward over checked q, k, v, out and dout (fmha_varlen's, and fmha's,
    swa_attention's and gemma_attention's): the gradients made, and
    `launch(q, k, v, out, dout, dq, dk, dv)` run with each a view of its own shape, unless no
    query meets a key (no query, or `s`, the keys, 0: zero gradients, no launch). Returns
    (dq, dk, dv) in the kinds of q, k, v."""
    runs = bool(qa.tensor.size and s)  # else no query meets a key: every gradient is zero
    grads = gradient_outputs(runs, qa, ka, va)
    if runs:
        q4, k4, v4, o4, g4 = (view(x.tensor, x.shape) for x in (qa, ka, va, oa, ga))
        dq4, dk4, dv4 = (view(t, x.shape) for (t, _), x in zip(grads, (qa, ka, va), strict=True))
        launch(q4, k4, v4, o4, g4, dq4, dk4, dv4)
    return gradient_results((qa, ka, va), grads)
