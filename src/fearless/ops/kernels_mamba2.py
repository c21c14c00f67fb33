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
  - the gradients, from the chunk's entry state and end gradient, in blocks of BR steps of a
    chunk (`GRAD_ROWS`) that each hold one (CS, BR) tile of the chunk's (CS, CS) products:
    `chunk_dx` (dx, columns j of wcb_ij = exp(g_i - g_j) c_i . b_j), `chunk_db` (this head's
    db, columns j of q'_ij = exp(g_i - g_j) dy_i . x_j, and two terms of ddt per step),
    `chunk_dc` (this head's dc, rows i of q'); `chunk_ddt` per (b, chunk, h) (no mma) sums the
    gradient of g (c_i . dc_i - b_i . db_i) in reverse into ddt and the (b, chunk, h) parts of
    da, dd (summed by `head_sum`); db, dc are f32 per head, summed over the group's heads by
    `group_sum`. (One block per chunk holding all of them spilled: 4,800 bytes a thread in bf16
    at chunk 128, 13 to 36 s of tileiras, bench/experiments/compile_slow_kernels.py.)
For 16-bit inputs the mmas take tf32 operands (`mma_operands`; q' split in two, `mm_exact`)
and g is a masked row sum, not a scan (`decay`); f32 inputs keep f32 operands and the scan.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile

from ._io import view, zeros_beside
from .kernels_gemm import mm, mma_operands
from .kernels_rows import kernel_of, next_pow2

GRAD_ROWS = 64  # the steps of a chunk (at most) a block of chunk_dx, chunk_db, chunk_dc takes
GRAD_WARPS = 8  # their num_worker_warps for 16-bit inputs (compile_slow_kernels.py)


@tile.function
def rows(t, b, i, h, CS, COLS):
    """Rows i * CS.. of head (or group) h of a (B, T, H, D) tensor as an f32 (CS, COLS) tile."""
    return tile.load(t, (b, i, h, 0), (1, CS, 1, COLS)).reshape((CS, COLS)).astype(fl.f32)


@tile.function
def row_block(t, b, i, h, j, CS, BP):
    """Rows i * CS.. and columns j * BP.. of head h of a (B, T, H, P) tensor, f32 (CS, BP)."""
    return tile.load(t, (b, i, h, j), (1, CS, 1, BP)).reshape((CS, BP)).astype(fl.f32)


@tile.function
def head_value(t, h):
    """Head h's value of an (H,) tensor (a or d), an f32 scalar."""
    return tile.load(t, (h,), (1,)).astype(fl.f32).item()


@tile.function
def decay(a, dt, b, i, h, CS, NO_SCAN):
    """The chunk's dt (CS, 1) f32 and cumulative log decay g (CS, 1); with NO_SCAN, g as a
    masked row sum (tileiras refuses tf32 mmas beside a tile.cumsum: "Failed to select TMA
    load instruction", as ops/kernels_delta_rule.py's chunk_prepare)."""
    dtc = tile.load(dt, (b, i, h), (1, CS, 1)).reshape((CS,)).astype(fl.f32)
    ah = head_value(a, h)
    if NO_SCAN:  # compile-time
        lower = tile.arange(CS)[:, None] >= tile.arange(CS)[None, :]
        g = tile.sum(tile.where(lower, (dtc * ah).reshape((1, CS)), 0.0), axis=1)
    else:
        g = tile.cumsum(dtc * ah, axis=0)
    return dtc.reshape((CS, 1)), g.reshape((CS, 1))


@tile.function
def entry_state(states, b, ci, h, j, BP, NP):
    """Chunk ci's entry state (BP, NP) f32, rows j * BP.. of P, of head h (`chunk_states`'s
    (B, NC, H, P, N))."""
    return tile.load(states, (b, ci, h, j, 0), (1, 1, 1, BP, NP)).reshape((BP, NP))


@tile.function
def causal_decay(g, CS):
    """W (CS, CS): exp(g_i - g_j) where i >= j, else 0 (never the exponential of a rise)."""
    causal = tile.arange(CS)[:, None] >= tile.arange(CS)[None, :]
    return tile.where(causal, tile.exp(tile.where(causal, g - g.reshape((1, CS)), 0.0)), 0.0)


def mma_modes(dt):
    """(MX, NO_SCAN) of the kernels for inputs of dtype `dt`: the mmas' operand type
    (`mma_operands`: tf32 for 16-bit inputs) and whether g is a masked row sum, not a scan, as
    it must be beside tf32 mmas (`decay`). Host code: a kernel factory's compile-time values."""
    MX = mma_operands(dt)
    return MX, fl.tf32 == MX


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
    MX, NO_SCAN = mma_modes(dt)

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
        states.partition((1, next_pow2(nc), 1, bp, np_)) as sp,
        final.partition((1, 1, 1, bp, np_)) as fp,
    ):
        kernel(sp, fp, u, v, a, dt, s0, hpg, cs)


# ------------------------------------------------------------------------------ output


def make_chunk_out(dt, tdt, adt, ddt_, **hints):
    """out (B, T, H, P) in `dt`, in tiles of (1, CS, 1, BP), from x (B, T, H, P), b, c
    (B, T, G, N) in `dt`, a and d (H,), dt (B, T, H) and the chunks' entry states
    (B, NC, H, P, N) f32."""
    MX, NO_SCAN = mma_modes(dt)

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
        s0 = entry_state(states, b, ci, h, j, BP, NP)
        y = mm(ct, s0.transpose(), tile.zeros((CS, BP), fl.f32), MX) * tile.exp(g)
        cb = mm(ct, bt.transpose(), tile.zeros((CS, CS), fl.f32), MX) * causal_decay(g, CS)
        y = mm(cb, xt * dtc, y, MX)
        y = y + xt * head_value(d, h)
        out.store(y.reshape((1, CS, 1, BP)).astype(dt))

    return chunk_out


def chunk_out_launch(out, x, b, c, a, d, dt, states, hpg, cs):
    """out (B, T, H, P) = the chunked scan's output from the entry states (`chunk_states`)."""
    bp, np_ = min(64, next_pow2(x.shape[3])), next_pow2(b.shape[3])
    kernel = kernel_of(make_chunk_out, x.dtype, dt.dtype, a.dtype, d.dtype)
    with out.partition((1, cs, 1, bp)) as part:
        kernel(part, x, b, c, a, d, dt, states, hpg, np_)


# ------------------------------------------------------------------------------ gradients


@tile.function
def steps(t, b, i, h, CS):
    """Rows i * CS.. of head h of a (B, T, H) tensor as an f32 (CS, 1) tile."""
    return tile.load(t, (b, i, h), (1, CS, 1)).reshape((CS, 1)).astype(fl.f32)


@tile.function
def block_of(r, CS, BR):
    """(chunk, first step in it) of block r of BR steps, chunks of CS steps."""
    return r // (CS // BR), (r % (CS // BR)) * BR


@tile.function
def end_gradient(dends, b, ci, h, PP, NP):
    """Chunk ci's end gradient dS (PP, NP) f32, from the reversed end gradients (slot
    NC - 1 - ci)."""
    nc = dends.shape[1]
    return tile.load(dends, (b, nc - 1 - ci, h, 0, 0), (1, 1, 1, PP, NP)).reshape((PP, NP))


@tile.function
def pick(v, R0, BR, CS):
    """Rows R0.. of the (CS, 1) tile v, (BR, 1), bit for bit (R0 a runtime multiple of BR)."""
    at = (tile.arange(BR) + R0)[:, None] == tile.arange(CS)[None, :]
    return tile.sum(tile.where(at, v.reshape((1, CS)), 0.0), axis=1, keepdims=True)


@tile.function
def decay_block(gi, gj, I0, J0, RI, RJ):
    """Rows I0.. and columns J0.. of the chunk's (CS, CS) `causal_decay`, (RI, RJ), from
    those rows' g (RI, 1) and those columns' (RJ, 1)."""
    causal = (tile.arange(RI) + I0)[:, None] >= (tile.arange(RJ) + J0)[None, :]
    return tile.where(causal, tile.exp(tile.where(causal, gi - gj.reshape((1, RJ)), 0.0)), 0.0)


@tile.function
def mm_exact(a, b, acc, MX):
    """a @ b + acc as `mm`, with `a` f32 to about f32's precision where MX is tf32: its high
    bits (the low 13 of the mantissa cleared: exact in tf32) and the rest, two mmas; b must be
    exact in MX (16-bit inputs are). The gradient of g is a difference of such products that
    nearly cancel: with `a` rounded to tf32, bf16 da was 4 to 5% off (20% in f16)."""
    if fl.tf32 == MX:  # compile-time
        hi = tile.bitcast(tile.bitcast(a, fl.i32) & -8192, fl.f32)
        acc = mm(a - hi, b, acc, MX)
        a = hi
    return mm(a, b, acc, MX)


@tile.function
def column_block(part, u, dy, bm, cm, a, dtt, HPG, CS, PP, NP, NO_SCAN):
    """What `chunk_dx` and `chunk_db` both read first. Their block `part` (b, r, h, _), of BR
    rows, owns steps j0.. of chunk ci (`block_of`). Returns (b, h, ci, j0); the chunk's dy and c,
    (CS, PP) and (CS, NP); the block's rows of u (dy for dx, x for db) and of b, (BR, PP) and
    (BR, NP); its dt (BR, 1); the chunk's g (CS, 1) and the block's rows of it (BR, 1)."""
    b, r, h, _ = part.index
    BR = part.shape[1]
    ci, j0 = block_of(r, CS, BR)
    grp = h // HPG
    dyt, ct = rows(dy, b, ci, h, CS, PP), rows(cm, b, ci, grp, CS, NP)
    uj, bj = rows(u, b, r, h, BR, PP), rows(bm, b, r, grp, BR, NP)
    dtj = steps(dtt, b, r, h, BR)
    _, g = decay(a, dtt, b, ci, h, CS, NO_SCAN)
    gj = pick(g, j0, BR, CS)
    return b, h, ci, j0, dyt, ct, uj, bj, dtj, g, gj


def make_chunk_dx(dt, tdt, adt, ddt_, **hints):
    """Rows j (BR steps of a chunk of CS) of dx (B, T, H, P) in `dt`, in tiles of
    (1, BR, 1, PP), from dy (B, T, H, P), b, c (B, T, G, N) in `dt`, a, d (H,), dt (B, T, H)
    and the reversed end gradients (B, NC, H, P, N) f32:
        dx_j = d dy_j + dt_j (sum_i wcb_ij dy_i + exp(L - g_j) dS b_j)
    with wcb_ij = exp(g_i - g_j) c_i . b_j (i >= j), columns j of it: a (CS, BR) tile."""
    MX, NO_SCAN = mma_modes(dt)

    @tile.kernel(**hints)
    def chunk_dx(
        dx: tile.Part[dt], dy: tile.Tensor[dt], bm: tile.Tensor[dt], cm: tile.Tensor[dt],
        a: tile.Tensor[adt], d: tile.Tensor[ddt_], dtt: tile.Tensor[tdt],
        dends: tile.Tensor[fl.f32], HPG: tile.Const[int], CS: tile.Const[int],
        NP: tile.Const[int],
    ):  # fmt: skip
        BR, PP = dx.shape[1], dx.shape[3]
        b, h, ci, j0, dyt, ct, dyj, bj, dtj, g, gj = column_block(
            dx, dy, dy, bm, cm, a, dtt, HPG, CS, PP, NP, NO_SCAN
        )
        ds = end_gradient(dends, b, ci, h, PP, NP)
        wcb = decay_block(g, gj, 0, j0, CS, BR)
        wcb = wcb * mm(ct, bj.transpose(), tile.zeros((CS, BR), fl.f32), MX)
        dxs = mm(bj, ds.transpose(), tile.zeros((BR, PP), fl.f32), MX)
        dxt = mm(wcb.transpose(), dyt, dxs * tile.exp(g[CS - 1, 0] - gj), MX)
        dh = head_value(d, h)
        dx.store((dyj * dh + dxt * dtj).reshape((1, BR, 1, PP)).astype(dt))

    return chunk_dx


def make_chunk_db(dt, tdt, adt, **hints):
    """Columns j (BR steps of a chunk of CS) of the gradients: dbh (B, T, H, N) f32 in tiles
    of (1, BR, 1, NP), and per step (B, T, H) f32 viewed (B, T, H, 1) in tiles of
    (1, BR, 1, 1): ddt's direct term x_j . dx_j less d's, over dt_j (`direct`), and k_in, L's
    part through S_end's inputs; from x and dy (B, T, H, P), b, c (B, T, G, N) in `dt`, a,
    dt (B, T, H) and the reversed end gradients (B, NC, H, P, N) f32:
        db_j = dt_j e_j,  e_j = sum_i q'_ij c_i + exp(L - g_j) x_j dS,  direct_j = b_j . e_j
    with q'_ij = exp(g_i - g_j) dy_i . x_j (i >= j), columns j of it: a (CS, BR) tile."""
    MX, NO_SCAN = mma_modes(dt)

    @tile.kernel(**hints)
    def chunk_db(
        dbh: tile.Part[fl.f32], direct: tile.Part[fl.f32], k_in: tile.Part[fl.f32],
        x: tile.Tensor[dt], dy: tile.Tensor[dt], bm: tile.Tensor[dt], cm: tile.Tensor[dt],
        a: tile.Tensor[adt], dtt: tile.Tensor[tdt], dends: tile.Tensor[fl.f32],
        HPG: tile.Const[int], CS: tile.Const[int], PP: tile.Const[int],
    ):  # fmt: skip
        BR, NP = dbh.shape[1], dbh.shape[3]
        b, h, ci, j0, dyt, ct, xj, bj, dtj, g, gj = column_block(
            dbh, x, dy, bm, cm, a, dtt, HPG, CS, PP, NP, NO_SCAN
        )
        el = tile.exp(g[CS - 1, 0] - gj)
        ds = end_gradient(dends, b, ci, h, PP, NP)
        qw = decay_block(g, gj, 0, j0, CS, BR)
        qw = qw * mm(dyt, xj.transpose(), tile.zeros((CS, BR), fl.f32), MX)
        xds = mm(xj, ds, tile.zeros((BR, NP), fl.f32), MX) * el
        k_in.store((dtj * tile.sum(bj * xds, axis=1, keepdims=True)).reshape((1, BR, 1, 1)))
        e = mm_exact(qw.transpose(), ct, xds, MX)
        dbh.store((e * dtj).reshape((1, BR, 1, NP)))
        direct.store(tile.sum(bj * e, axis=1, keepdims=True).reshape((1, BR, 1, 1)))

    return chunk_db


def make_chunk_dc(dt, tdt, adt, **hints):
    """Rows i (BR steps of a chunk of CS) of the gradients: dch (B, T, H, N) f32 in tiles of
    (1, BR, 1, NP) and c_i . dc_i (B, T, H) f32 viewed (B, T, H, 1) in tiles of (1, BR, 1, 1)
    (`rowp`); from x and dy (B, T, H, P), b, c (B, T, G, N) in `dt`, a, dt and the entry states
    (B, NC, H, P, N) f32: dc_i = exp(g_i) dy_i S0 + sum_j q'_ij dt_j b_j."""
    MX, NO_SCAN = mma_modes(dt)

    @tile.kernel(**hints)
    def chunk_dc(
        dch: tile.Part[fl.f32], rowp: tile.Part[fl.f32], x: tile.Tensor[dt],
        dy: tile.Tensor[dt], bm: tile.Tensor[dt], cm: tile.Tensor[dt], a: tile.Tensor[adt],
        dtt: tile.Tensor[tdt], states: tile.Tensor[fl.f32], HPG: tile.Const[int],
        CS: tile.Const[int], PP: tile.Const[int],
    ):  # fmt: skip
        b, r, h, _ = dch.index
        BR, NP = dch.shape[1], dch.shape[3]
        ci, i0 = block_of(r, CS, BR)
        grp = h // HPG
        xt, bt = rows(x, b, ci, h, CS, PP), rows(bm, b, ci, grp, CS, NP)
        dyi, cr = rows(dy, b, r, h, BR, PP), rows(cm, b, r, grp, BR, NP)
        dtc, g = decay(a, dtt, b, ci, h, CS, NO_SCAN)
        gi = pick(g, i0, BR, CS)
        s0 = entry_state(states, b, ci, h, 0, PP, NP)
        q = decay_block(gi, g, i0, 0, BR, CS) * dtc.reshape((1, CS))
        q = q * mm(dyi, xt.transpose(), tile.zeros((BR, CS), fl.f32), MX)
        dc = mm(dyi, s0, tile.zeros((BR, NP), fl.f32), MX) * tile.exp(gi)
        dc = mm_exact(q, bt, dc, MX)
        dch.store(dc.reshape((1, BR, 1, NP)))
        rowp.store(tile.sum(cr * dc, axis=1, keepdims=True).reshape((1, BR, 1, 1)))

    return chunk_dc


def make_chunk_ddt(dt, tdt, adt, **hints):
    """ddt (B, T, H) in `tdt` in tiles of (1, CS, 1, 1) (viewed (B, T, H, 1)), da_p and dd_p
    (B, NC, H, 1) f32 in tiles of (1, 1, 1, 1), from `chunk_dc`'s rowp and `chunk_db`'s
    direct and k_in (B, T, H) f32, x and dy (B, T, H, P) in `dt`, a, dt, the entry states and
    the reversed end gradients (B, NC, H, P, N) f32. The gradient of step i's cumulative log
    decay g_i is c_i . dc_i - b_i . db_i (the sums over wcb's and q's rows and columns), plus
    L's at the last step; ddt_j = direct_j + a sum_{i >= j} of it."""

    @tile.kernel(**hints)
    def chunk_ddt(
        ddt: tile.Part[tdt], da_p: tile.Part[fl.f32], dd_p: tile.Part[fl.f32],
        rowp: tile.Tensor[fl.f32], direct: tile.Tensor[fl.f32], k_in: tile.Tensor[fl.f32],
        x: tile.Tensor[dt], dy: tile.Tensor[dt], a: tile.Tensor[adt], dtt: tile.Tensor[tdt],
        states: tile.Tensor[fl.f32], dends: tile.Tensor[fl.f32], PP: tile.Const[int],
        NP: tile.Const[int],
    ):  # fmt: skip
        b, ci, h, _ = ddt.index
        CS = ddt.shape[1]
        nc = states.shape[1]
        dtc, dr = steps(dtt, b, ci, h, CS), steps(direct, b, ci, h, CS)
        ah = head_value(a, h)
        s0 = entry_state(states, b, ci, h, 0, PP, NP)
        ds = tile.load(dends, (b, nc - 1 - ci, h, 0, 0), (1, 1, 1, PP, NP)).reshape((PP, NP))
        k_sum = tile.sum(steps(k_in, b, ci, h, CS))
        d_last = tile.exp(tile.sum(dtc) * ah) * tile.sum(ds * s0) + k_sum
        dg = steps(rowp, b, ci, h, CS) - dtc * dr
        dg = dg + tile.where(tile.arange(CS)[:, None] == CS - 1, d_last, 0.0)
        dsum = tile.cumsum(dg, axis=0, reverse=True)
        ddt.store((dr + dsum * ah).reshape((1, CS, 1, 1)).astype(tdt))
        da_p.store(tile.sum(dsum * dtc).reshape((1, 1, 1, 1)))
        xt, dyt = rows(x, b, ci, h, CS, PP), rows(dy, b, ci, h, CS, PP)
        dd_p.store(tile.sum(dyt * xt).reshape((1, 1, 1, 1)))

    return chunk_ddt


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
    scratch = (dbh, dch (B, T, H, N) f32, da_p, dd_p (B, NC, H) f32, rowp, direct, k_in
    (B, T, H) f32): `chunk_dx` and `chunk_db` a block per BR columns of a chunk, `chunk_dc`
    per BR rows (each holds one (CS, BR) tile of the chunk's products, never a (CS, CS) one),
    `chunk_ddt` per chunk (no mma), then the sums."""
    dx, ddt, db, dc, da, dd = grads
    dbh, dch, da_p, dd_p, rowp, direct, k_in = scratch
    pp, np_ = next_pow2(x.shape[3]), next_pow2(b.shape[3])
    br = min(cs, GRAD_ROWS)
    warps = GRAD_WARPS if x.dtype in (fl.bf16, fl.f16) else None

    def steps(t):  # (B, T, H) f32 as (B, T, H, 1) in BR steps
        return view(t, (*t.shape, 1)).partition((1, br, 1, 1))

    with dx.partition((1, br, 1, pp)) as dxp:
        kernel_of(make_chunk_dx, x.dtype, dt.dtype, a.dtype, d.dtype).options(
            num_worker_warps=warps
        )(dxp, dy, b, c, a, d, dt, dends, hpg, cs, np_)
    with dbh.partition((1, br, 1, np_)) as dbp, steps(direct) as drp, steps(k_in) as kp:
        kernel_of(make_chunk_db, x.dtype, dt.dtype, a.dtype).options(num_worker_warps=warps)(
            dbp, drp, kp, x, dy, b, c, a, dt, dends, hpg, cs, pp
        )
    with dch.partition((1, br, 1, np_)) as dcp, steps(rowp) as rp:
        kernel_of(make_chunk_dc, x.dtype, dt.dtype, a.dtype).options(num_worker_warps=warps)(
            dcp, rp, x, dy, b, c, a, dt, states, hpg, cs, pp
        )
    with (
        view(ddt, (*ddt.shape, 1)).partition((1, cs, 1, 1)) as dtp,
        view(da_p, (*da_p.shape, 1)).partition((1, 1, 1, 1)) as dap,
        view(dd_p, (*dd_p.shape, 1)).partition((1, 1, 1, 1)) as ddp,
    ):
        kernel_of(make_chunk_ddt, x.dtype, dt.dtype, a.dtype)(
            dtp, dap, ddp, rowp, direct, k_in, x, dy, a, dt, states, dends, pp, np_
        )
    with db.partition((1, cs, 1, np_)) as dbp, dc.partition((1, cs, 1, np_)) as dcp:
        kernel_of(make_group_sum, db.dtype)(dbp, dcp, dbh, dch, hpg)
    hp = next_pow2(da.shape[0])
    rb = min(64, next_pow2(da_p.shape[0] * da_p.shape[1]))
    with da.partition((hp,)) as dap, dd.partition((hp,)) as ddp:
        rows2 = (da_p.shape[0] * da_p.shape[1], da_p.shape[2])
        kernel_of(make_head_sum)(dap, ddp, view(da_p, rows2), view(dd_p, rows2), rb)
