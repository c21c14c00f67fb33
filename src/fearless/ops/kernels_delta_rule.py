"""The Tile kernels behind `fearless.ops.recurrent_gated_delta_rule` and
`fearless.ops.chunk_gated_delta_rule` (Qwen3-Next's gated delta rule), and their launches.

Per value head hv (query/key head h = hv // GROUP), with the state S (K, V) in f32:
    S = S * exp(g_t);  delta = beta_t * (v_t - S^T k_t);  S = S + k_t delta^T;  o_t = S^T q_t
q_t scaled by 1 / sqrt(K), q_t and k_t first l2-normalised (x * rsqrt(sum x^2 + 1e-6)) when
`l2norm`.
  - `recurrent`: one block per (batch, value head, BV columns of V); the state tile (KP, BV)
    stays in registers through a loop over time. The output is viewed (B, T, HV, 1, V) and
    partitioned (1, TT, 1, 1, BV) (TT >= T a power of two): the block walks its tile one time
    step at a time (`chunks`), so it writes only its own (b, hv, columns); steps past T are
    skipped. The final state is a second Part, (B, 1, HV, K, V) in tiles of (1, 1, 1, KP, BV),
    so that both partitions give the same grid.
  - the chunked form, as TileGym's two kernels (the WY / UT representation within a chunk):
    `chunk_prepare`, one block per (batch, value head, chunk of CS steps), computes the chunk's
    cumulative log decay gc, the strictly lower (CS, CS) matrix
    A = -(beta_i k_i . k_j * exp(gc_i - gc_j)) (i > j), solves its rows by forward
    substitution in the reference's order into T = I + A' (TileGym's l2norm path; its other
    path's Neumann series is not used), and stores
    u = T (beta v) and w = T (beta k exp(gc)) (f32 scratch, (B, HV, NC, CS, V | K));
    `chunk_inter`, one block per (batch, value head, BV columns), walks the chunks with the
    state in registers: v_new = u - w S, o = (q exp(gc)) S + (q k^T * decay, causal) v_new,
    S = S exp(gc_last) + (k exp(gc_last - gc))^T v_new. Rows past T read zero (g = 0 there,
    as the reference pads), so a partial last chunk changes nothing past its rows.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile

from ._io import zeros_beside
from .kernels_gemm import mm, mma_operands
from .kernels_rows import kernel_of, next_pow2, size_class

EPS = 1e-6  # the l2norm's, as FLA's and Hugging Face's


@tile.function
def head_rows(t, b, i, h, ROWS, COLS, l2norm):
    """Rows i * ROWS.. of head h of a (B, T, H, D) tensor as an f32 (ROWS, COLS) tile, each
    row l2-normalised when `l2norm`."""
    x = tile.load(t, (b, i, h, 0), (1, ROWS, 1, COLS)).reshape((ROWS, COLS)).astype(fl.f32)
    if l2norm:  # compile-time
        x = x * tile.rsqrt(tile.sum(x * x, axis=1, keepdims=True) + EPS)
    return x


@tile.function
def column(t, b, i, h, ROWS):
    """Rows i * ROWS.. of head h of a (B, T, H) tensor (g, beta) as an f32 (ROWS,) tile."""
    return tile.load(t, (b, i, h), (1, ROWS, 1)).reshape((ROWS,)).astype(fl.f32)


@tile.function
def initial(state0, b, hv, j, KP, BV, has_init):
    """The (KP, BV) f32 state tile at head hv, columns j * BV..: state0's, or zeros."""
    s = tile.zeros((KP, BV), fl.f32)
    if has_init:  # compile-time
        s = tile.load(state0, (b, hv, 0, j), (1, 1, KP, BV)).reshape((KP, BV))
    return s


# ----------------------------------------------------------------------------- recurrent


@tile.function
def recurrent_steps(out, q, k, v, g, beta, state0, scale, GROUP, KP, dt, l2norm, has_init):
    """Every time step of out's (b, hv, columns) in order; returns the final state tile."""
    b, _, hv, _, j = out.index
    BV = out.shape[4]
    h = hv // GROUP
    steps = q.shape[1]
    s = initial(state0, b, hv, j, KP, BV, has_init)
    for c in out.chunks((1, 1, 1, 1, BV)):
        t = c.index[1]
        if t < steps:
            qt = head_rows(q, b, t, h, 1, KP, l2norm).reshape((KP, 1)) * scale
            kt = head_rows(k, b, t, h, 1, KP, l2norm).reshape((KP, 1))
            vt = tile.load(v, (b, t, hv, j), (1, 1, 1, BV)).reshape((1, BV)).astype(fl.f32)
            gt = tile.load(g, (b, t, hv), (1, 1, 1)).astype(fl.f32).item()
            bt = tile.load(beta, (b, t, hv), (1, 1, 1)).astype(fl.f32).item()
            s = s * tile.exp(gt)
            delta = (vt - tile.sum(s * kt, axis=0, keepdims=True)) * bt
            s = s + kt * delta
            o = tile.sum(s * qt, axis=0, keepdims=True)
            c.store(o.reshape((1, 1, 1, 1, BV)).astype(dt))
    return s


def make_recurrent(dt, gdt, bdt, l2norm, has_init, **hints):
    """The recurrent kernel: out (B, T, HV, 1, V) in `dt` (a Part of (1, TT, 1, 1, BV)), q, k
    (B, T, H, K) and v (B, T, HV, V) in `dt`, g (B, T, HV) in `gdt`, beta in `bdt`, state0
    (B, HV, K, V) f32 (read when `has_init`); `state`, an optional output: the final state
    into a Part of (B, 1, HV, K, V) f32 in tiles of (1, 1, 1, KP, BV)."""

    @tile.kernel(**hints)
    def recurrent(
        out: tile.Part[dt], state: tile.Part[fl.f32] | None, q: tile.Tensor[dt],
        k: tile.Tensor[dt], v: tile.Tensor[dt], g: tile.Tensor[gdt], beta: tile.Tensor[bdt],
        state0: tile.Tensor[fl.f32], scale: fl.f32, GROUP: tile.Const[int],
        KP: tile.Const[int],
    ):  # fmt: skip
        s = recurrent_steps(out, q, k, v, g, beta, state0, scale, GROUP, KP, dt, l2norm, has_init)
        if state is not None:  # compile-time
            state.store(s.reshape((1, 1, 1, KP, out.shape[4])))

    return recurrent


RECURRENT_CONFIGS = [dict(bv=64, occupancy=2), dict(bv=32, occupancy=4)]


def _recurrent_key(out, q, k, v, g, beta, state0, state, scale, group, l2norm, *_, **__):
    b, t, hv, _, vd = out.shape
    return (
        size_class(b * hv), size_class(t), q.shape[3], vd, group, g.dtype.name,
        beta.dtype.name, l2norm, state0 is not None, state is not None,
    )  # fmt: skip


@fl.autotune(configs=RECURRENT_CONFIGS, key=_recurrent_key)
def recurrent_tuned(
    out, q, k, v, g, beta, state0, state, scale, group, l2norm, *, bv, occupancy
):  # fmt: skip
    """out (B, T, HV, 1, V) = the gated delta rule of q, k (B, T, H, K), v (B, T, HV, V), g,
    beta (B, T, HV) from state0 (B, HV, K, V) f32 or None (zeros); `state`: None, or the final
    state's (B, 1, HV, K, V) f32 tensor."""
    kp = next_pow2(q.shape[3])
    bv = min(bv, next_pow2(out.shape[4]))
    make = kernel_of(make_recurrent, q.dtype, g.dtype, beta.dtype, l2norm, state0 is not None)
    kernel = make.options(occupancy=occupancy)
    s0 = state0 if state0 is not None else state_dummy(out)
    tt = next_pow2(out.shape[1])
    with out.partition((1, tt, 1, 1, bv)) as part:
        if state is None:
            kernel(part, None, q, k, v, g, beta, s0, scale, group, kp)
        else:
            with state.partition((1, 1, 1, kp, bv)) as sp:
                kernel(part, sp, q, k, v, g, beta, s0, scale, group, kp)


def state_dummy(like):
    """A (1, 1, 1, 1) f32 stand-in for an absent initial state (never read)."""
    return zeros_beside(like, (1, 1, 1, 1), fl.f32)


# ------------------------------------------------------------------------------- chunked


@tile.function
def solve_unit_lower(a, CS):
    """(I + A') for the strictly lower (CS, CS) `a`, its rows solved in the reference's order:
    row i += sum over m < i of row_i[m] * (solved row m), i = 1 .. CS - 1."""
    rows = tile.arange(CS)[:, None]
    for i in range(1, CS):
        sel = rows == i
        row = tile.sum(tile.where(sel, a, 0.0), axis=0, keepdims=True)  # (1, CS)
        corr = tile.sum(row.reshape((CS, 1)) * a, axis=0, keepdims=True)  # (1, CS)
        a = a + tile.where(sel, corr, 0.0)
    return a + tile.where(rows == tile.arange(CS)[None, :], 1.0, 0.0)


def make_chunk_prepare(dt, gdt, bdt, l2norm, **hints):
    """u (B, HV, NC, CS, V), w (B, HV, NC, CS, K) and gc (B, HV, NC, CS, 1), all f32 Parts of one
    (b, hv, chunk) per block, from k (B, T, H, K), v (B, T, HV, V) in `dt`, g and beta
    (B, T, HV); u is written in chunks of VC columns."""
    MX = mma_operands(dt)
    NO_SCAN = MX is fl.tf32  # tileiras refuses tf32 mmas beside a tile.cumsum

    @tile.kernel(**hints)
    def chunk_prepare(
        u: tile.Part[fl.f32], w: tile.Part[fl.f32], gc: tile.Part[fl.f32], k: tile.Tensor[dt],
        v: tile.Tensor[dt], g: tile.Tensor[gdt], beta: tile.Tensor[bdt],
        GROUP: tile.Const[int], VC: tile.Const[int],
    ):  # fmt: skip
        b, hv, ci, _, _ = w.index
        _, _, _, CS, KP = w.shape
        kt = head_rows(k, b, ci, hv // GROUP, CS, KP, l2norm)
        bt = column(beta, b, ci, hv, CS).reshape((CS, 1))
        if NO_SCAN:  # compile-time: the running sum as a masked row sum
            lower = tile.arange(CS)[:, None] >= tile.arange(CS)[None, :]
            gcum = tile.sum(
                tile.where(lower, column(g, b, ci, hv, CS).reshape((1, CS)), 0.0), axis=1
            )
        else:
            gcum = tile.cumsum(column(g, b, ci, hv, CS), axis=0)
        rows = tile.arange(CS)[:, None]
        cols = tile.arange(CS)[None, :]
        strict = rows > cols
        diff = gcum.reshape((CS, 1)) - gcum.reshape((1, CS))
        kb = kt * bt
        a = mm(kb, kt.transpose(), tile.zeros((CS, CS), fl.f32), MX)
        a = tile.where(strict, -(a * tile.exp(tile.where(strict, diff, 0.0))), 0.0)
        tm = solve_unit_lower(a, CS)
        kbe = kb * tile.exp(gcum).reshape((CS, 1))
        w.store(mm(tm, kbe, tile.zeros((CS, KP), fl.f32), MX).reshape((1, 1, 1, CS, KP)))
        gc.store(gcum.reshape((1, 1, 1, CS, 1)))
        for c in u.chunks((1, 1, 1, CS, VC)):
            jv = c.index[4]
            vt = tile.load(v, (b, ci, hv, jv), (1, CS, 1, VC)).reshape((CS, VC)).astype(fl.f32)
            uc = mm(tm, vt * bt, tile.zeros((CS, VC), fl.f32), MX)
            c.store(uc.reshape((1, 1, 1, CS, VC)))

    return chunk_prepare


@tile.function
def chunk_steps(out, q, k, u, w, gc, state0, scale, GROUP, KP, CS, dt, l2norm, has_init, MX):
    """Every chunk of out's (b, hv, columns) in order; returns the final state tile."""
    b, _, hv, _, j = out.index
    BV = out.shape[4]
    h = hv // GROUP
    chunks = u.shape[2]
    s = initial(state0, b, hv, j, KP, BV, has_init)
    rows = tile.arange(CS)[:, None]
    causal = rows >= tile.arange(CS)[None, :]
    for c in out.chunks((1, CS, 1, 1, BV)):
        ci = c.index[1]
        if ci < chunks:
            wt = tile.load(w, (b, hv, ci, 0, 0), (1, 1, 1, CS, KP)).reshape((CS, KP))
            ut = tile.load(u, (b, hv, ci, 0, j), (1, 1, 1, CS, BV)).reshape((CS, BV))
            v_new = ut - mm(wt, s, tile.zeros((CS, BV), fl.f32), MX)
            qt = head_rows(q, b, ci, h, CS, KP, l2norm) * scale
            kt = head_rows(k, b, ci, h, CS, KP, l2norm)
            gcum = tile.load(gc, (b, hv, ci, 0, 0), (1, 1, 1, CS, 1)).reshape((CS, 1))
            o = mm(qt * tile.exp(gcum), s, tile.zeros((CS, BV), fl.f32), MX)
            qk = mm(qt, kt.transpose(), tile.zeros((CS, CS), fl.f32), MX)
            diff = gcum - gcum.reshape((1, CS))
            qk = tile.where(causal, qk * tile.exp(tile.where(causal, diff, 0.0)), 0.0)
            o = mm(qk, v_new, o, MX)
            c.store(o.reshape((1, CS, 1, 1, BV)).astype(dt))
            g_last = gcum[CS - 1, 0]
            kw = kt * tile.exp(g_last - gcum)
            s = mm(kw.transpose(), v_new, s * tile.exp(g_last), MX)
    return s


def make_chunk_inter(dt, l2norm, has_init, **hints):
    """The inter-chunk kernel: out (B, T, HV, 1, V) in `dt` (a Part of (1, TT, 1, 1, BV),
    walked in chunks of CS steps), q, k (B, T, H, K) in `dt`, u, w, gc from `chunk_prepare`,
    state0 (B, HV, K, V) f32; `state`, an optional output: the final state as
    `make_recurrent`'s."""
    MX = mma_operands(dt)

    @tile.kernel(**hints)
    def chunk_inter(
        out: tile.Part[dt], state: tile.Part[fl.f32] | None, q: tile.Tensor[dt],
        k: tile.Tensor[dt], u: tile.Tensor[fl.f32], w: tile.Tensor[fl.f32],
        gc: tile.Tensor[fl.f32], state0: tile.Tensor[fl.f32], scale: fl.f32,
        GROUP: tile.Const[int], KP: tile.Const[int], CS: tile.Const[int],
    ):  # fmt: skip
        s = chunk_steps(out, q, k, u, w, gc, state0, scale, GROUP, KP, CS, dt, l2norm, has_init, MX)
        if state is not None:  # compile-time
            state.store(s.reshape((1, 1, 1, KP, out.shape[4])))

    return chunk_inter


def chunk_prepare_launch(u, w, gc, k, v, g, beta, group, l2norm):
    """u, w, gc (see `make_chunk_prepare`) of k, v, g, beta: one block per (b, hv, chunk)."""
    cs, kp = w.shape[3], next_pow2(w.shape[4])
    vp = next_pow2(u.shape[4])
    kernel = kernel_of(make_chunk_prepare, k.dtype, g.dtype, beta.dtype, l2norm)
    with (
        u.partition((1, 1, 1, cs, vp)) as up,
        w.partition((1, 1, 1, cs, kp)) as wp,
        gc.partition((1, 1, 1, cs, 1)) as gp,
    ):
        kernel(up, wp, gp, k, v, g, beta, group, min(vp, 64))


CHUNK_CONFIGS = [dict(bv=64, occupancy=2), dict(bv=32, occupancy=2)]


def _chunk_key(out, q, k, u, w, gc, state0, state, scale, group, l2norm, *_, **__):
    b, t, hv, _, vd = out.shape
    return (
        size_class(b * hv), size_class(t), q.shape[3], vd, w.shape[3], group, q.dtype.name,
        l2norm, state0 is not None, state is not None,
    )  # fmt: skip


@fl.autotune(configs=CHUNK_CONFIGS, key=_chunk_key)
def chunk_inter_tuned(
    out, q, k, u, w, gc, state0, state, scale, group, l2norm, *, bv, occupancy
):  # fmt: skip
    """out (B, T, HV, 1, V) = the chunked gated delta rule from u, w, gc (`chunk_prepare`),
    q, k (B, T, H, K), state0 (B, HV, K, V) f32 or None; `state` None or the final state's
    (B, 1, HV, K, V) f32 tensor."""
    kp, cs = next_pow2(q.shape[3]), w.shape[3]
    bv = min(bv, next_pow2(out.shape[4]))
    make = kernel_of(make_chunk_inter, q.dtype, l2norm, state0 is not None)
    kernel = make.options(occupancy=occupancy)
    s0 = state0 if state0 is not None else state_dummy(out)
    tt = next_pow2(u.shape[2] * cs)
    with out.partition((1, tt, 1, 1, bv)) as part:
        if state is None:
            kernel(part, None, q, k, u, w, gc, s0, scale, group, kp, cs)
        else:
            with state.partition((1, 1, 1, kp, bv)) as sp:
                kernel(part, sp, q, k, u, w, gc, s0, scale, group, kp, cs)
