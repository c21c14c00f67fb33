"""Float64 references of Mamba-2's SSD scan (fearless.ops.mamba2_chunk_forward / _backward):
the plain sequential recurrence, per batch and head h (group h // (H // G)),
    S = exp(a_h dt_t) S + dt_t x_t b_t^T;   y_t = S c_t + d_h x_t
in NumPy, and the same recurrence in torch float64 whose autograd gives the gradients."""

from __future__ import annotations

from typing import Any

import numpy as np


def scan_reference(x, a, b, c, d, dt, s0=None):  # type: ignore[no-untyped-def]
    """(y (B, T, H, P), final state (B, H, P, N)) in float64, step by step."""
    x, a, b, c, d, dt = (np.asarray(v, np.float64) for v in (x, a, b, c, d, dt))
    bsz, t, h, p = x.shape
    n, hpg = b.shape[3], h // b.shape[2]
    s = np.zeros((bsz, h, p, n)) if s0 is None else np.array(s0, np.float64)
    y = np.empty_like(x)
    for i in range(t):
        bt = np.repeat(b[:, i], hpg, axis=1)  # (B, H, N)
        ct = np.repeat(c[:, i], hpg, axis=1)
        s = s * np.exp(a * dt[:, i])[..., None, None]
        s = s + (dt[:, i, :, None] * x[:, i])[..., None] * bt[:, :, None, :]
        y[:, i] = np.einsum("bhpn,bhn->bhp", s, ct) + d[:, None] * x[:, i]
    return y, s


def grad_reference(x, a, b, c, d, dt, s0, dy, dfinal) -> tuple[Any, ...]:  # type: ignore[no-untyped-def]
    """TileGym's backward outputs (dx, da, db, dc, dd, ddt, dinit_state) in float64: torch
    autograd through the sequential recurrence (db, dc per group, (B, T, G, N))."""
    import torch

    def t64(v, grad=True):  # type: ignore[no-untyped-def]
        return torch.tensor(np.asarray(v, np.float64), requires_grad=grad)

    xs, as_, bs, cs, ds, dts, s0s = (t64(v) for v in (x, a, b, c, d, dt, s0))
    hpg = xs.shape[2] // bs.shape[2]
    s = s0s
    ys = []
    for i in range(xs.shape[1]):
        bt = bs[:, i].repeat_interleave(hpg, dim=1)
        ct = cs[:, i].repeat_interleave(hpg, dim=1)
        s = s * torch.exp(as_ * dts[:, i])[..., None, None]
        s = s + (dts[:, i, :, None] * xs[:, i])[..., None] * bt[:, :, None, :]
        ys.append(torch.einsum("bhpn,bhn->bhp", s, ct) + ds[:, None] * xs[:, i])
    y = torch.stack(ys, dim=1)
    loss = (y * t64(dy, False)).sum() + (s * t64(dfinal, False)).sum()
    grads = torch.autograd.grad(loss, (xs, as_, bs, cs, ds, dts, s0s))
    return tuple(g.numpy() for g in grads)
