"""The ops family's Mamba-2 cases: `mamba2_chunk_forward` and `mamba2_chunk_backward`, the
chunked SSD scan and its seven gradients, run as family_ops_more.py's cases are: fearless.ops
against TileGym 1.5.1's operator of the same name (`tilegym.ops.<name>`, cutile backend) and
torch eager, checked against a float64 torch reference.

Shapes: TileGym has no Mamba-2 benchmark, and the tests/ops tree of its git mirror (75a1430)
has no test_mamba2*.py to take perf shapes from, so the cases take Mamba-2 2.7B's mixer: 80
heads of 64 (d_inner 5120), one group, d_state 128, at batch 1 and sequence 2048 and 8192, x, b,
c and dout in bf16, a, d, dt and the states in f32. Spec shapes are (B, T, H, P, G, N). The
chunk is 64 (TileGym's and fearless's default): Mamba-2's own 256 is past fearless's chunk sizes
(16 to 128); the dry shapes, whose T is not a multiple of 64, take 16. Inputs are Mamba-2's
ranges: x, b, c silu of normals, a = -U(1, 16) (its A_init_range), dt = softplus(N - 4) (near
its 0.001 ... 0.1 dt range), d normal, the initial state 0.3 N; the backward's dout and
dfinal_state normals.

- mamba2_chunk_forward: every impl returns (y, the final state), checked joined. Torch eager:
  `ssd_chunked_torch`, the chunked SSD in plain torch (the minimal SSD of the Mamba-2 paper,
  with groups and the d skip) on f32 copies of x, b, c, y back in x's dtype;
- mamba2_chunk_backward: the seven gradients (dx, da, db, dc, dd, ddt, dinit_state), checked
  joined. fearless and TileGym are called directly (no forward in the timing); torch eager is
  autograd through `ssd_chunked_torch`, built once outside the timing, the timed call
  `torch.autograd.grad((y, final), leaves, (dout, dfinal), retain_graph=True)`.

The float64 reference of both is `ssd_chunked_torch` in float64 (its autograd for the backward):
the chunked form is exact algebra of the step-by-step recurrence (tests/support/mamba2_ref.py's,
which the CPU test compares it with), and a sequential float64 scan over 8192 steps is too slow.
Flops (an estimate): the forward's products, per chunk and head 2 l^2 P (the causal block) +
4 l P N (states in and out), per group 2 l^2 N (C B^T); the backward counted as twice those.

Cost (estimate, H200): `--quick` runs all four cases; the float64 reference at T 8192 builds
(80 x 128 chunks of 64 x 64) decay blocks, a few GB: well under a second to a few seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import family_ops_base as base
from .family_ops_base import Bench, Joined, Spec, builder_dry_body, randn

MAMBA2_27B = (80, 64, 1, 128)  # heads, head_dim, groups, d_state
MAMBA_CHUNK = 64


def ssm_specs() -> list[Spec]:
    """This module's cases, in run order."""
    out: list[Spec] = []
    for op in ("mamba2_chunk_forward", "mamba2_chunk_backward"):
        out += [Spec(op, "bf16", (1, t, *MAMBA2_27B)) for t in (2048, 8192)]
    return out


# (B, T, H, P, G, N): P and N ragged, two heads per group, three chunks of 16
SSM_DRY_SHAPES: dict[str, tuple[int, ...]] = {
    "mamba2_chunk_forward": (1, 48, 4, 12, 2, 10),
    "mamba2_chunk_backward": (1, 48, 4, 12, 2, 10),
}


def chunk_of(t: int) -> int:
    """The chunk size at sequence length t: MAMBA_CHUNK, or 16 where T is not a multiple of it."""
    return MAMBA_CHUNK if t % MAMBA_CHUNK == 0 else 16


def ssd_chunked_torch(
    x: Any, a: Any, b: Any, c: Any, d: Any, dt: Any, s0: Any, *, cs: int
) -> tuple[Any, Any]:
    """Mamba-2's SSD a chunk of `cs` steps at a time, in plain torch: (y (B, T, H, P) in x's
    dtype, the final state (B, H, P, N)). Per batch and head h (group h // (H // G)):
    S = exp(a dt_t) S + dt_t x_t b_t^T, y_t = S c_t + d x_t, from s0. Computed in float64 where
    the inputs are, else in f32; T a multiple of cs."""
    import torch

    f64 = x.dtype == torch.float64
    up = (lambda v: v) if f64 else (lambda v: v.float())
    out_dtype = x.dtype
    x, a, b, c, d, dt, s0 = (up(v) for v in (x, a, b, c, d, dt, s0))
    bsz, t, h, p = x.shape
    g, n = b.shape[2], b.shape[3]
    r, nc = h // g, t // cs
    # the log decays per chunk, (B, G, R, nc, l), and their running sums
    acs = (a * dt).reshape(bsz, nc, cs, g, r).permute(0, 3, 4, 1, 2).cumsum(-1)
    xdt = (x * dt[..., None]).reshape(bsz, nc, cs, g, r, p)
    bb, cc = (v.reshape(bsz, nc, cs, g, n) for v in (b, c))
    lower = torch.tril(torch.ones(cs, cs, dtype=torch.bool, device=x.device))
    gaps = (acs[..., :, None] - acs[..., None, :]).masked_fill(~lower, float("-inf"))
    blocks = torch.einsum("bclgn,bcsgn->bgcls", cc, bb)[:, :, None] * gaps.exp()
    y = torch.einsum("bgrcls,bcsgrp->bclgrp", blocks, xdt)  # within each chunk
    to_end = (acs[..., -1:] - acs).exp().permute(0, 3, 4, 1, 2)[..., None]  # (B, nc, l, G, R, 1)
    local = torch.einsum("bclgn,bclgrp->bcgrpn", bb, xdt * to_end)  # each chunk's own state
    states = torch.cat([s0.reshape(bsz, 1, g, r, p, n), local], dim=1)
    ends = torch.nn.functional.pad(acs[..., -1], (1, 0)).cumsum(-1)  # (B, G, R, nc + 1)
    zlower = torch.tril(torch.ones(nc + 1, nc + 1, dtype=torch.bool, device=x.device))
    carry = (ends[..., :, None] - ends[..., None, :]).masked_fill(~zlower, float("-inf")).exp()
    entering = torch.einsum("bgrzc,bcgrpn->bzgrpn", carry, states)  # state entering chunk z
    decay_in = acs.exp().permute(0, 3, 4, 1, 2)[..., None]
    y = y + torch.einsum("bclgn,bcgrpn->bclgrp", cc, entering[:, :-1]) * decay_in
    y = y.reshape(bsz, t, h, p) + x * d[:, None]
    return y.to(out_dtype), entering[:, -1].reshape(bsz, h, p, n)


def ssd_flops(s: Spec) -> int:
    """The forward's products (the module doc's estimate)."""
    bsz, t, h, p, g, n = s.shape
    cs = chunk_of(t)
    return 2 * bsz * t * (h * (cs * p + 2 * p * n) + g * cs * n)


def _ssd_inputs(torch: Any, s: Spec) -> list[Any]:
    """x, a, b, c, d, dt, init_state at Mamba-2's ranges (see the module doc)."""
    bsz, t, h, p, g, n = s.shape
    silu, dtype = torch.nn.functional.silu, randn(torch, s.dtype, 1).dtype
    x, b, c = (silu(randn(torch, "f32", *sh)).to(dtype)
               for sh in ((bsz, t, h, p), (bsz, t, g, n), (bsz, t, g, n)))  # fmt: skip
    a = -(torch.rand(h, device=base.DEVICE) * 15.0 + 1.0)
    d = randn(torch, "f32", h)
    dt = torch.nn.functional.softplus(randn(torch, "f32", bsz, t, h) - 4.0)
    s0 = randn(torch, "f32", bsz, h, p, n) * 0.3
    return [x, a, b, c, d, dt, s0]


def _mamba2(torch: Any, s: Spec) -> Bench:
    ins = _ssd_inputs(torch, s)
    bsz, t, h, p, _, n = s.shape
    cs = chunk_of(t)
    if s.op == "mamba2_chunk_forward":
        return Bench(
            lambda fo: lambda: Joined(fo.mamba2_chunk_forward(*ins, cs)),
            lambda tg: lambda: Joined(tg.mamba2_chunk_forward(*ins, cs)),
            lambda: Joined(ssd_chunked_torch(*ins, cs=cs)),
            lambda: Joined(ssd_chunked_torch(*(v.double() for v in ins), cs=cs)).double(),
            flops=ssd_flops(s),
        )
    dout = randn(torch, s.dtype, bsz, t, h, p)
    dfin = randn(torch, "f32", bsz, h, p, n)

    def autograd(leaves: list[Any], dy: Any, dfinal: Any) -> Callable[[], Joined]:
        y, final = ssd_chunked_torch(*leaves, cs=cs)
        return lambda: Joined(torch.autograd.grad((y, final), leaves, (dy, dfinal), retain_graph=True))  # fmt: skip

    def reference() -> Any:
        leaves = [v.double().requires_grad_() for v in ins]
        return autograd(leaves, dout.double(), dfin.double())().double()

    return Bench(
        lambda fo: lambda: Joined(fo.mamba2_chunk_backward(*ins, dout, dfin, cs)),
        lambda tg: lambda: Joined(tg.mamba2_chunk_backward(*ins, dout, dfin, cs)),
        autograd([v.clone().requires_grad_() for v in ins], dout, dfin),
        reference,
        flops=2 * ssd_flops(s),
        tilegym_note="tilegym.ops.mamba2_chunk_backward (standalone, state_dtype f32), cutile",
    )


SSM_BUILDERS: dict[str, Callable[[Any, Spec], Bench]] = {
    "mamba2_chunk_forward": _mamba2,
    "mamba2_chunk_backward": _mamba2,
}


def ssm_dry_body(s: Spec) -> Callable[[], float]:
    """The dry run of `s` (at its small shape): its GPU builder on CPU torch tensors, fearless.ops
    on the simulator, against the float64 reference."""
    return builder_dry_body(SSM_BUILDERS[s.op], s)
