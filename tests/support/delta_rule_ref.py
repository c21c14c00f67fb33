"""float64 NumPy references of the gated delta rule (Qwen3-Next; TileGym's
tests/ops/test_{recurrent,chunk}_gated_delta_rule.py torch references, from Hugging Face):
the recurrence step by step, and the chunked WY form as the reference writes it (pad to whole
chunks, the strictly lower solve row by row, then chunk after chunk). Value head hv reads
query/key head hv // (HV // H)."""

from __future__ import annotations

import numpy as np


def _prepare(q, k, v, g, beta, l2norm):  # type: ignore[no-untyped-def]
    q, k, v, g, beta = (np.asarray(x, np.float64) for x in (q, k, v, g, beta))
    if l2norm:
        q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6)
        k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    group = v.shape[2] // q.shape[2]
    q, k = (np.repeat(x, group, axis=2) for x in (q, k))  # per value head
    # (B, HV, T, D) and (B, HV, T)
    q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
    g, beta = (x.transpose(0, 2, 1) for x in (g, beta))
    return q * q.shape[-1] ** -0.5, k, v, g, beta


def recurrent_reference(q, k, v, g, beta, initial_state=None, l2norm=False):  # type: ignore[no-untyped-def]
    """(output (B, T, HV, V), final state (B, HV, K, V)), float64."""
    q, k, v, g, beta = _prepare(q, k, v, g, beta, l2norm)
    b, hv, t, kd = k.shape
    s = (
        np.zeros((b, hv, kd, v.shape[-1]))
        if initial_state is None
        else np.array(initial_state, np.float64)
    )
    out = np.zeros((b, hv, t, v.shape[-1]))
    for i in range(t):
        s = s * np.exp(g[:, :, i])[..., None, None]
        kv = np.einsum("bhkv,bhk->bhv", s, k[:, :, i])
        delta = (v[:, :, i] - kv) * beta[:, :, i, None]
        s = s + k[:, :, i, :, None] * delta[:, :, None, :]
        out[:, :, i] = np.einsum("bhkv,bhk->bhv", s, q[:, :, i])
    return out.transpose(0, 2, 1, 3), s


def chunk_reference(q, k, v, g, beta, chunk_size, initial_state=None, l2norm=False):  # type: ignore[no-untyped-def]
    """The chunked form of the reference, float64: equal to `recurrent_reference` up to
    rounding."""
    q, k, v, g, beta = _prepare(q, k, v, g, beta, l2norm)
    b, hv, t, kd = k.shape
    cs = chunk_size
    pad = (-t) % cs
    q, k, v = (np.pad(x, ((0, 0), (0, 0), (0, pad), (0, 0))) for x in (q, k, v))
    g, beta = (np.pad(x, ((0, 0), (0, 0), (0, pad))) for x in (g, beta))
    nc = (t + pad) // cs
    ch = lambda x: x.reshape(b, hv, nc, cs, *x.shape[3:])  # noqa: E731
    q, k, v, g, beta = ch(q), ch(k), ch(v), ch(g), ch(beta)
    g = np.cumsum(g, axis=-1)
    lower = np.tril(np.ones((cs, cs), bool))
    decay = np.where(lower, np.exp(np.where(lower, g[..., :, None] - g[..., None, :], 0)), 0)
    kb, vb = k * beta[..., None], v * beta[..., None]
    a = np.where(np.tril(np.ones((cs, cs), bool), -1), -(kb @ k.swapaxes(-1, -2)) * decay, 0)
    for i in range(1, cs):
        row = a[..., i, :i].copy()
        a[..., i, :i] = row + (row[..., :, None] * a[..., :i, :i]).sum(-2)
    a = a + np.eye(cs)
    u = a @ vb
    w = a @ (kb * np.exp(g)[..., None])
    s = (
        np.zeros((b, hv, kd, v.shape[-1]))
        if initial_state is None
        else np.array(initial_state, np.float64)
    )
    out = np.zeros_like(u)
    for i in range(nc):
        qi, ki = q[:, :, i], k[:, :, i]
        attn = np.where(lower, qi @ ki.swapaxes(-1, -2) * decay[:, :, i], 0)
        v_new = u[:, :, i] - w[:, :, i] @ s
        out[:, :, i] = (qi * np.exp(g[:, :, i])[..., None]) @ s + attn @ v_new
        last = g[:, :, i, -1]
        s = (
            s * np.exp(last)[..., None, None]
            + (ki * np.exp(last[..., None] - g[:, :, i])[..., None]).swapaxes(-1, -2) @ v_new
        )
    out = out.reshape(b, hv, nc * cs, -1)[:, :, :t]
    return out.transpose(0, 2, 1, 3), s
