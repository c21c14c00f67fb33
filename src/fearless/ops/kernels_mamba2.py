"""The Tile kernels behind `fearless.ops.mamba2_chunk_forward` and
`fearless.ops.mamba2_chunk_backward` (Mamba-2's chunked SSD scan), and their launches.

Per batch b and head h (group g = h // HPG), with the state S (P, N) in f32, each step t:
    S = exp(a_h dt_t) S + dt_t x_t b_t^T;   y_t = S c_t + d_h x_t
A chunk of CS steps, with g_i the cumulative sum of a dt over the chunk's steps 0..i and
L = g_{CS-1}, from its entry state S0:
    y_i = exp(g_i) S0 c_i + sum_{j <= i} exp(g_i - g_j) (c_i . b_j) dt_j x_j + d x_i
    S_end = exp(L) S0 + sum_j exp(L - g_j) dt_j x_j b_j^T
Rows past T read zero (dt = 0 there: no decay, no input), so a partial last chunk changes
nothing.
  - `chunk_states`: one block per (b, h, BP rows of P); walks the chunks with the (BP, NP)
    state in registers and writes each chunk's entry state (B, NC, H, P, N) f32 and the final
    state. Its backward twin (`reverse`) walks the chunks from the last, carrying dS, the
    gradient of a chunk's end state: dS_prev = exp(L) dS + sum_i exp(g_i) dy_i c_i^T; chunk
    slot r holds chunk NC - 1 - r's end gradient (a block writes its chunks in order).
  - `chunk_out`: one block per (b, chunk, h, BP rows of P): the output from the entry state.
  - `chunk_grads`: one block per (b, chunk, h), all of P and N: dx, ddt and this head's db, dc
    (f32, summed over the group's heads by `group_sum`) and the (b, chunk, h) parts of da, dd
    (summed by `head_sum`), from the chunk's entry state and end gradient.
For 16-bit inputs the mmas take tf32 operands (`mma_operands`) and g is a masked row sum, not
a scan (`decay`); f32 inputs keep f32 operands and the scan.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile

from ._io import partitioned, view, zeros_beside
from .kernels_gemm import mm, mma_operands
from .kernels_rows import kernel_of, next_pow2


@tile.function
def rows(t, b, i, h, CS, COLS):
    """Rows i * CS.. of head (or group) h of a (B, T, H, D) tensor as an f32 (CS, COLS) tile."""
    return tile.load(t, (b, i, h, 0), (1, CS, 1, COLS)).reshape((CS, COLS)).astype(fl.f32)


@tile.function
def row_block(t, b, i, h, j, CS, BP):
    """Rows i * CS.. and columns j * BP.. of head h of a (B, T, H, P) tensor, f32 (CS, BP)."""
    return tile.load(t, (b, i, h, j), (1, CS, 1, BP)).reshape((CS, BP)).astype(fl.f32)


@tile.function
def decay(a, dt, b, i, h, CS, NO_SCAN):
    """The chunk's dt (CS, 1) f32 and cumulative log decay g (CS, 1); with NO_SCAN, g as a
    masked row sum (tileiras refuses tf32 mmas beside a tile.cumsum: "Failed to select TMA
    load instruction", as ops/kernels_delta_rule.py's chunk_prepare)."""
    dtc = tile.load(dt, (b, i, h), (1, CS, 1)).reshape((CS,)).astype(fl.f32)
    ah = tile.load(a, (h,), (1,)).astype(fl.f32).item()
    if NO_SCAN:  # compile-time
        lower = tile.arange(CS)[:, None] >= tile.arange(CS)[None, :]
        g = tile.sum(tile.where(lower, (dtc * ah).reshape((1, CS)), 0.0), axis=1)
    else:
        g = tile.cumsum(dtc * ah, axis=0)
    return dtc.reshape((CS, 1)), g.reshape((CS, 1))


@tile.function
def causal_decay(g, CS):
    """W (CS, CS): exp(g_i - g_j) where i >= j, else 0 (never the exponential of a rise)."""
    causal = tile.arange(CS)[:, None] >= tile.arange(CS)[None, :]
    return tile.where(causal, tile.exp(tile.where(causal, g - g.reshape((1, CS)), 0.0)), 0.0)


# ------------------------------------------------------------------------------ states


@tile.function
def state_walk(states, final, u, v, a, dt, state0, HPG, CS, reverse, has_init, sdt, MX, NO_SCAN):
    """The chunk recurrence of `states`' block (b, h, rows of P): forward (u = x, v = b), or
    reverse (u = dy, v = c); see the module docstring. Stores each chunk's state, then the last
    one into `final` in `sdt`."""
    b, _, h, j, _ = states.index
    BP, NP = states.shape[3], states.shape[4]
    nc = (u.shape[1] + CS - 1) // CS
    grp = h // HPG
    s = tile.zeros((BP, NP), fl.f32)
    if has_init:  # compile-time
        s = tile.load(state0, (b, h, j, 0), (1, 1, BP, NP)).reshape((BP, NP)).astype(fl.f32)
    for c in states.chunks((1, 1, 1, BP, NP)):
        r = c.index[1]
        if r < nc:
            c.store(s.reshape((1, 1, 1, BP, NP)))
            ci = r
            if reverse:  # compile-time
                ci = nc - 1 - r
            dtc, g = decay(a, dt, b, ci, h, CS, NO_SCAN)
            g_last = g[CS - 1, 0]
            ut = row_block(u, b, ci, h, j, CS, BP)
            vt = rows(v, b, ci, grp, CS, NP)
            w = tile.exp(g) if reverse else dtc * tile.exp(g_last - g)  # reverse: compile-time
            s = mm((ut * w).transpose(), vt, s * tile.exp(g_last), MX)
    final.store(s.reshape((1, 1, 1, BP, NP)).astype(sdt))


def make_chunk_states(dt, tdt, adt, sdt, idt, reverse, has_init, **hints):
    """states (B, NC, H, P, N) f32 in tiles of (1, NCP, 1, BP, NP) and final (B, 1, H, P, N) in
    `sdt` in tiles of (1, 1, 1, BP, NP); u (B, T, H, P) and v (B, T, G, N) in `dt`, a (H,) in
    `adt`, dt (B, T, H) in `tdt`, state0 (B, H, P, N) in `idt` (read when `has_init`)."""
    MX = mma_operands(dt)
    NO_SCAN = fl.tf32 == MX

    @tile.kernel(**hints)
    def chunk_states(
        states: tile.Part[fl.f32], final: tile.Part[sdt], u: tile.Tensor[dt],
        v: tile.Tensor[dt], a: tile.Tensor[adt], dtt: tile.Tensor[tdt],
        state0: tile.Tensor[idt], HPG: tile.Const[int], CS: tile.Const[int],
    ):  # fmt: skip
        state_walk(
            states, final, u, v, a, dtt, state0, HPG, CS, reverse, has_init, sdt, MX, NO_SCAN
        )

    return chunk_states


def chunk_states_launch(states, final, u, v, a, dt, state0, hpg, cs, reverse):
    """Entry states (or reversed end gradients) of every chunk into `states` (B, NC, H, P, N)
    f32, and the last into `final` (B, 1, H, P, N); state0 None reads zeros."""
    _, nc, _, p, n = states.shape
    bp, np_ = min(64, next_pow2(p)), next_pow2(n)
    s0 = state0 if state0 is not None else zeros_beside(final, (1, 1, 1, 1), fl.f32)
    kernel = kernel_of(
        make_chunk_states, u.dtype, dt.dtype, a.dtype, final.dtype, s0.dtype, reverse,
        state0 is not None,
    )  # fmt: skip
    with (
        partitioned(states, (1, next_pow2(nc), 1, bp, np_)) as sp,
        partitioned(final, (1, 1, 1, bp, np_)) as fp,
    ):
        kernel(sp, fp, u, v, a, dt, s0, hpg, cs)


# ------------------------------------------------------------------------------ output


def make_chunk_out(dt, tdt, adt, ddt_, **hints):
    """out (B, T, H, P) in `dt`, in tiles of (1, CS, 1, BP), from x (B, T, H, P), b, c
    (B, T, G, N) in `dt`, a and d (H,), dt (B, T, H) and the chunks' entry states
    (B, NC, H, P, N) f32."""
    MX = mma_operands(dt)
    NO_SCAN = fl.tf32 == MX

    @tile.kernel(**hints)
    def chunk_out(
        out: tile.Part[dt], x: tile.Tensor[dt], bm: tile.Tensor[dt], cm: tile.Tensor[dt],
        a: tile.Tensor[adt], d: tile.Tensor[ddt_], dtt: tile.Tensor[tdt],
        states: tile.Tensor[fl.f32], HPG: tile.Const[int], NP: tile.Const[int],
    ):  # fmt: skip
        b, ci, h, j = out.index
        CS, BP = out.shape[1], out.shape[3]
        grp = h // HPG
        xt = row_block(x, b, ci, h, j, CS, BP)
        bt, ct = rows(bm, b, ci, grp, CS, NP), rows(cm, b, ci, grp, CS, NP)
        dtc, g = decay(a, dtt, b, ci, h, CS, NO_SCAN)
        s0 = tile.load(states, (b, ci, h, j, 0), (1, 1, 1, BP, NP)).reshape((BP, NP))
        y = mm(ct, s0.transpose(), tile.zeros((CS, BP), fl.f32), MX) * tile.exp(g)
        cb = mm(ct, bt.transpose(), tile.zeros((CS, CS), fl.f32), MX) * causal_decay(g, CS)
        y = mm(cb, xt * dtc, y, MX)
        y = y + xt * tile.load(d, (h,), (1,)).astype(fl.f32).item()
        out.store(y.reshape((1, CS, 1, BP)).astype(dt))

    return chunk_out


def chunk_out_launch(out, x, b, c, a, d, dt, states, hpg, cs):
    """out (B, T, H, P) = the chunked scan's output from the entry states (`chunk_states`)."""
    bp, np_ = min(64, next_pow2(x.shape[3])), next_pow2(b.shape[3])
    kernel = kernel_of(make_chunk_out, x.dtype, dt.dtype, a.dtype, d.dtype)
    with partitioned(out, (1, cs, 1, bp)) as part:
        kernel(part, x, b, c, a, d, dt, states, hpg, np_)


# ------------------------------------------------------------------------------ gradients


def make_chunk_grads(dt, tdt, adt, ddt_, **hints):
    """dx (B, T, H, P) in `dt` in tiles of (1, CS, 1, PP), ddt (B, T, H) in `tdt` in tiles of
    (1, CS, 1, 1) (viewed (B, T, H, 1)), dbh and dch (B, T, H, N) f32 in tiles of
    (1, CS, 1, NP), da_p and dd_p (B, NC, H, 1) f32 in tiles of (1, 1, 1, 1); from x and dy (B, T, H, P), b, c (B, T, G, N), a, d,
    dt, the entry states and the reversed end gradients (B, NC, H, P, N) f32."""
    MX = mma_operands(dt)
    NO_SCAN = fl.tf32 == MX

    @tile.kernel(**hints)
    def chunk_grads(
        dx: tile.Part[dt], ddt: tile.Part[tdt], dbh: tile.Part[fl.f32],
        dch: tile.Part[fl.f32], da_p: tile.Part[fl.f32], dd_p: tile.Part[fl.f32],
        x: tile.Tensor[dt], dy: tile.Tensor[dt], bm: tile.Tensor[dt], cm: tile.Tensor[dt],
        a: tile.Tensor[adt], d: tile.Tensor[ddt_], dtt: tile.Tensor[tdt],
        states: tile.Tensor[fl.f32], dends: tile.Tensor[fl.f32], HPG: tile.Const[int],
    ):  # fmt: skip
        b, ci, h, _ = dx.index
        CS, PP, NP = dx.shape[1], dx.shape[3], dbh.shape[3]
        nc = states.shape[1]
        grp = h // HPG
        xt, dyt = rows(x, b, ci, h, CS, PP), rows(dy, b, ci, h, CS, PP)
        bt, ct = rows(bm, b, ci, grp, CS, NP), rows(cm, b, ci, grp, CS, NP)
        dtc, g = decay(a, dtt, b, ci, h, CS, NO_SCAN)
        ah = tile.load(a, (h,), (1,)).astype(fl.f32).item()
        dh = tile.load(d, (h,), (1,)).astype(fl.f32).item()
        g_last = g[CS - 1, 0]
        el = tile.exp(g_last - g)
        eg = tile.exp(g)
        s0 = tile.load(states, (b, ci, h, 0, 0), (1, 1, 1, PP, NP)).reshape((PP, NP))
        ds = tile.load(dends, (b, nc - 1 - ci, h, 0, 0), (1, 1, 1, PP, NP)).reshape((PP, NP))
        zc = tile.zeros((CS, CS), fl.f32)
        w = causal_decay(g, CS)
        wcb = w * mm(ct, bt.transpose(), zc, MX)  # (i, j): exp(g_i - g_j) c_i . b_j
        gxy = mm(dyt, xt.transpose(), zc, MX)  # (i, j): dy_i . x_j
        # dx_j = d dy_j + dt_j (sum_i wcb_ij dy_i + exp(L - g_j) dS b_j)
        dxs = mm(bt, ds.transpose(), tile.zeros((CS, PP), fl.f32), MX) * el
        dxt = mm(wcb.transpose(), dyt, dxs, MX)
        dx.store((dyt * dh + dxt * dtc).reshape((1, CS, 1, PP)).astype(dt))
        q = w * gxy * dtc.reshape((1, CS))  # (i, j): exp(g_i - g_j) (dy_i . x_j) dt_j
        dc = mm(dyt, s0, tile.zeros((CS, NP), fl.f32), MX) * eg
        dch.store(mm(q, bt, dc, MX).reshape((1, CS, 1, NP)))
        db = mm(xt, ds, tile.zeros((CS, NP), fl.f32), MX) * (dtc * el)
        dbh.store(mm(q.transpose(), ct, db, MX).reshape((1, CS, 1, NP)))
        # the gradient of each step's cumulative log decay g_i, then of a dt (a reverse sum)
        m = q * mm(ct, bt.transpose(), zc, MX)
        cs0 = mm(ct, s0.transpose(), tile.zeros((CS, PP), fl.f32), MX)
        k_in = dtc * tile.sum(xt * dxs, axis=1, keepdims=True)  # through S_end's inputs
        dg = tile.sum(m, axis=1, keepdims=True) - tile.sum(m, axis=0).reshape((CS, 1))
        dg = dg + eg * tile.sum(dyt * cs0, axis=1, keepdims=True) - k_in
        d_last = tile.exp(g_last) * tile.sum(ds * s0) + tile.sum(k_in)
        dg = dg + tile.where(tile.arange(CS)[:, None] == CS - 1, d_last, 0.0)
        dsum = tile.cumsum(dg, axis=0, reverse=True)
        direct = tile.sum(dxt * xt, axis=1, keepdims=True)
        ddt.store((direct + dsum * ah).reshape((1, CS, 1, 1)).astype(tdt))
        da_p.store(tile.sum(dsum * dtc).reshape((1, 1, 1, 1)))
        dd_p.store(tile.sum(dyt * xt).reshape((1, 1, 1, 1)))

    return chunk_grads


def make_group_sum(dt, **hints):
    """db, dc (B, T, G, N) in `dt`, in tiles of (1, CS, 1, NP): the sums of dbh, dch
    (B, T, H, N) f32 over each group's HPG heads."""

    @tile.kernel(**hints)
    def group_sum(
        db: tile.Part[dt], dc: tile.Part[dt], dbh: tile.Tensor[fl.f32],
        dch: tile.Tensor[fl.f32], HPG: tile.Const[int],
    ):  # fmt: skip
        b, ci, grp, _ = db.index
        CS, NP = db.shape[1], db.shape[3]
        sb = tile.zeros((CS, NP), fl.f32)
        sc = tile.zeros((CS, NP), fl.f32)
        for k in range(HPG):
            sb = sb + rows(dbh, b, ci, grp * HPG + k, CS, NP)
            sc = sc + rows(dch, b, ci, grp * HPG + k, CS, NP)
        db.store(sb.reshape((1, CS, 1, NP)).astype(dt))
        dc.store(sc.reshape((1, CS, 1, NP)).astype(dt))

    return group_sum


def make_head_sum(**hints):
    """da, dd (H,) f32 in one tile of HP: the column sums of da_p, dd_p (R, H) f32, RB rows at
    a time."""

    @tile.kernel(**hints)
    def head_sum(
        da: tile.Part[fl.f32], dd: tile.Part[fl.f32], da_p: tile.Tensor[fl.f32],
        dd_p: tile.Tensor[fl.f32], RB: tile.Const[int],
    ):  # fmt: skip
        HP = da.shape[0]
        sa = tile.zeros((HP,), fl.f32)
        sd = tile.zeros((HP,), fl.f32)
        for i in range((da_p.shape[0] + RB - 1) // RB):
            sa = sa + tile.sum(tile.load(da_p, (i, 0), (RB, HP)), axis=0)
            sd = sd + tile.sum(tile.load(dd_p, (i, 0), (RB, HP)), axis=0)
        da.store(sa)
        dd.store(sd)

    return head_sum


def chunk_grads_launch(grads, scratch, x, dy, b, c, a, d, dt, states, dends, hpg, cs):
    """grads = (dx, ddt, db, dc, da, dd) of TileGym's backward (db, dc (B, T, G, N)), through
    scratch = (dbh, dch (B, T, H, N) f32, da_p, dd_p (B, NC, H) f32)."""
    dx, ddt, db, dc, da, dd = grads
    dbh, dch, da_p, dd_p = scratch
    pp, np_ = next_pow2(x.shape[3]), next_pow2(b.shape[3])
    kernel = kernel_of(make_chunk_grads, x.dtype, dt.dtype, a.dtype, d.dtype)
    with (
        partitioned(dx, (1, cs, 1, pp)) as dxp,
        partitioned(view(ddt, (*ddt.shape, 1)), (1, cs, 1, 1)) as dtp,
        partitioned(dbh, (1, cs, 1, np_)) as dbp,
        partitioned(dch, (1, cs, 1, np_)) as dcp,
        partitioned(view(da_p, (*da_p.shape, 1)), (1, 1, 1, 1)) as dap,
        partitioned(view(dd_p, (*dd_p.shape, 1)), (1, 1, 1, 1)) as ddp,
    ):
        kernel(dxp, dtp, dbp, dcp, dap, ddp, x, dy, b, c, a, d, dt, states, dends, hpg)
    with partitioned(db, (1, cs, 1, np_)) as dbp, partitioned(dc, (1, cs, 1, np_)) as dcp:
        kernel_of(make_group_sum, db.dtype)(dbp, dcp, dbh, dch, hpg)
    hp = next_pow2(da.shape[0])
    rb = min(64, next_pow2(da_p.shape[0] * da_p.shape[1]))
    with partitioned(da, (hp,)) as dap, partitioned(dd, (hp,)) as ddp:
        rows2 = (da_p.shape[0] * da_p.shape[1], da_p.shape[2])
        kernel_of(make_head_sum)(dap, ddp, view(da_p, rows2), view(dd_p, rows2), rb)
