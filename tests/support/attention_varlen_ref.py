"""The NumPy (float64) reference of TileGym's `fmha_varlen` and `fmha_decode` (restating the
cuTile `_fmha_varlen_kernel`'s masks, and its decode test's torch
SDPA reference): what tests/test_ops_attention_varlen.py and its GPU test compare with."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def fmha_varlen_reference(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scaling: float | None,
    is_causal: bool,
    q_lens: Sequence[int] | None,
    kv_lens: Sequence[int] | None,
) -> np.ndarray:
    """(B, H, L, D) float64: sequence b's first q_lens[b] queries over its first kv_lens[b]
    keys, query i at i + kv_lens[b] - q_lens[b] seeing keys j <= that when causal; GQA by
    h // (H / H_kv); 0 for padded rows and rows that see no key."""
    b, h, lq, d = q.shape
    hk, s = k.shape[1], k.shape[2]
    sc = 1.0 / math.sqrt(d) if scaling is None else scaling
    ql = [lq] * b if q_lens is None else [int(x) for x in q_lens]
    kl = [s] * b if kv_lens is None else [int(x) for x in kv_lens]
    out = np.zeros((b, h, lq, d))
    for bi in range(b):
        nq, nk = ql[bi], kl[bi]
        if nq == 0 or nk == 0:
            continue
        for hi in range(h):
            kv = hi // (h // hk)
            qq = q[bi, hi, :nq].astype(np.float64)
            kk = k[bi, kv, :nk].astype(np.float64)
            vv = v[bi, kv, :nk].astype(np.float64)
            sco = qq @ kk.T * sc
            if is_causal:
                pos = np.arange(nq)[:, None] + nk - nq
                sco = np.where(np.arange(nk)[None, :] <= pos, sco, -np.inf)
            m = sco.max(axis=1, keepdims=True)
            seen = np.isfinite(m)
            p = np.exp(sco - np.where(seen, m, 0.0))
            den = p.sum(axis=1, keepdims=True)
            out[bi, hi, :nq] = np.where(seen, (p @ vv) / np.where(seen, den, 1.0), 0.0)
    return out


def fmha_decode_reference(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, sm_scale: float | None
) -> np.ndarray:
    """(B, H, 1, D) float64: one query per head over every key, not causal (torch's SDPA with
    enable_gqa, TileGym's test reference)."""
    return fmha_varlen_reference(q, k, v, sm_scale, False, None, None)


def fmha_varlen_torch(
    q: Any,
    k: Any,
    v: Any,
    scaling: float | None,
    is_causal: bool,
    q_lens: Sequence[int] | None,
    kv_lens: Sequence[int] | None,
) -> Any:
    """`fmha_varlen_reference` in torch, differentiable (for the backward's tests: torch
    autograd of it in float64): 0, and no gradient, in the padded rows, past each sequence's
    keys and in rows that see no key."""
    import torch

    b, h, lq, d = q.shape
    hk, s = k.shape[1], k.shape[2]
    sc = 1.0 / math.sqrt(d) if scaling is None else scaling
    ql = [lq] * b if q_lens is None else [int(x) for x in q_lens]
    kl = [s] * b if kv_lens is None else [int(x) for x in kv_lens]
    outs = []
    for bi in range(b):
        nq, nk = ql[bi], kl[bi]
        kk = k[bi].repeat_interleave(h // hk, 0)[:, :nk]
        vv = v[bi].repeat_interleave(h // hk, 0)[:, :nk]
        sco = q[bi, :, :nq] @ kk.transpose(-1, -2) * sc
        if is_causal:
            pos = torch.arange(nq, device=q.device)[:, None] + nk - nq
            sco = sco.masked_fill(torch.arange(nk, device=q.device)[None, :] > pos, -torch.inf)
        seen = torch.isfinite(sco).any(-1, keepdim=True)
        p = torch.softmax(sco.masked_fill(~seen, 0.0), -1) * seen
        o = p @ vv
        outs.append(torch.cat([o, o.new_zeros(h, lq - nq, d)], 1))
    return torch.stack(outs)
