"""The Tile kernels behind `fearless.ops.fused_linear_cross_entropy` (ops/linear_cross_entropy.py),
and their autotuned launches.

Per chunk of token rows: `make_logits` writes the chunk's logits h @ W^T (+ bias), W read
transposed by the load (`order=(1, 0)`), never copied; `make_cross_entropy` walks each row's
logits in column chunks (an online max and sum), writes the row's loss and, with `grads`,
overwrites the logits with their gradient (softmax - onehot) * scale[row] in place; `make_dw`
and `make_db` add the chunk's G^T @ h and column sums of G into the gradient itself in its
dtype (the default `accum_dtype`, as Liger-Kernel's: f32 sums within a chunk, one rounding per
chunk), or into f32 accumulators that the last chunk writes in the parameters' dtype;
`make_loss_sum` adds the per-row losses.

Memory safety of the target: no kernel indexes memory with a target. The target's logit and
the onehot are `where(column == target)` over the columns a block loads, so a target outside
[0, vocab) matches no column (the host refuses it before any launch, ops/linear_cross_entropy.py)
and can never read or write outside its row.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import math

import fearless as fl
from fearless import tile

from .kernels_gemm import clustered, dividing_cluster, fitting_tiles, matmul_bt_tile
from .kernels_rows import kernel_of, next_pow2, size_class

# --------------------------------------------------------------------------- logits


def make_logits(dt, bias):
    """logits (M, N) = a (M, K) @ w (N, K)^T (+ b (N,) when `bias`), in `dt`, f32 sums (as
    torch's F.linear): one block per (BM, BN) tile of the logits."""

    @tile.kernel
    def logits(
        c: tile.Part[dt], a: tile.Tensor[dt], w: tile.Tensor[dt], b: tile.Tensor[dt],
        BK: tile.Const[int],
    ):  # fmt: skip
        BM, BN = c.shape
        i, j = c.index
        acc = matmul_bt_tile(a, w, i, j, BM, BN, BK)
        if bias:  # compile-time
            acc = acc + tile.load(b, (j,), (BN,)).astype(fl.f32)
        c.store(acc.astype(dt))

    return logits


# ---------------------------------------------------------------------- cross entropy


@tile.function
def logit_chunk(x, c, CH):
    """(the logits, in f32, and their columns, i64) of chunk `c` of CH columns of x; past V
    the logits read -inf (they add nothing to the row's sum) and the columns match no target."""
    v = tile.load_like(x, c, padding=-math.inf, allow_tma=False).astype(fl.f32)
    cols = (c.index[1] * CH + tile.arange(CH)).astype(fl.i64)
    return v, cols


@tile.function
def row_lse_and_target(x, at, t, CH):
    """(log-sum-exp, target logit) of the rows at `at` of x, in f32, over column chunks of
    CH: the max and sum online (the sum rescaled when the max grows). `t` (BM, 1) i64: each
    row's target; the target logit is picked by comparing columns, never by indexing."""
    BM, _ = at.shape
    m = tile.full((BM, 1), -math.inf, fl.f32)
    s = tile.zeros((BM, 1), fl.f32)
    tl = tile.zeros((BM, 1), fl.f32)
    for c in at.chunks((BM, CH)):
        v, cols = logit_chunk(x, c, CH)
        m_new = tile.maximum(m, tile.max(v, axis=1, keepdims=True))
        s = s * tile.exp(m - m_new) + tile.sum(tile.exp(v - m_new), axis=1, keepdims=True)
        m = m_new
        tl = tl + tile.sum(tile.where(cols == t, v, 0.0), axis=1, keepdims=True)
    return m + tile.log(s), tl


LANE_FLOOR = -1.0e30  # a lane's running max before its first logit: finite, so no inf - inf


@tile.function
def lane_lse_and_target(x, at, t, CH):
    """`row_lse_and_target` with no reduction inside the loop: each of the CH lanes keeps its
    own running max m and sum s (a larger logit v rescales: s * e + 1, a smaller one adds e,
    e = exp(-|v - m|), one exp either way) and the target logit it saw, and the lanes are
    combined once at the end. A chunk then costs no block-wide barrier, only its load."""
    BM, _ = at.shape
    m = tile.full((BM, CH), LANE_FLOOR, fl.f32)
    s = tile.zeros((BM, CH), fl.f32)
    tl = tile.zeros((BM, CH), fl.f32)
    for c in at.chunks((BM, CH)):
        v, cols = logit_chunk(x, c, CH)
        e = tile.exp(-tile.abs(v - m))
        up = v > m
        s = tile.where(up, s * e + 1.0, s + e)
        m = tile.where(up, v, m)
        tl = tl + tile.where(cols == t, v, 0.0)
    top = tile.max(m, axis=1, keepdims=True)
    total = tile.sum(s * tile.exp(m - top), axis=1, keepdims=True)
    return top + tile.log(total), tile.sum(tl, axis=1, keepdims=True)


def make_cross_entropy(dt, lt, CH, grads, lanes=False):
    """Per row of the logits x (rows, V) in `dt`: loss = lse - x[target] (0 where target ==
    ignore_index), stored in `lt`; with `grads`, x's row becomes (softmax - onehot) *
    scale[row] in place (0 for an ignored row). One block per BM rows (the partition's
    (BM, next_pow2(V)) tiles), the row in chunks of CH columns; `lanes`: the log-sum-exp by
    `lane_lse_and_target`, else `row_lse_and_target`."""

    @tile.kernel
    def cross_entropy(
        x: tile.Part[dt], loss: tile.Part[lt], target: tile.Tensor[fl.i64],
        scale: tile.Tensor[fl.f32], ignore_index: int,
    ):  # fmt: skip
        BM, _ = x.shape
        i = x.index[0]
        t = tile.load(target, (i,), (BM,), allow_tma=False).reshape((BM, 1))
        valid = t != ignore_index
        if lanes:  # compile-time
            lse, tl = lane_lse_and_target(x, x, t, CH)
        else:
            lse, tl = row_lse_and_target(x, x, t, CH)
        loss.store(tile.where(valid, lse - tl, 0.0).reshape((BM,)).astype(lt))
        if grads:  # compile-time
            sc = tile.load(scale, (i,), (BM,), allow_tma=False).reshape((BM, 1))
            sc = tile.where(valid, sc, 0.0)
            for c in x.chunks((BM, CH)):
                v, cols = logit_chunk(x, c, CH)
                onehot = tile.where(cols == t, 1.0, 0.0)
                c.store(((tile.exp(v - lse) - onehot) * sc).astype(dt))

    return cross_entropy


# ----------------------------------------------------------------- weight, bias grads


@tile.function
def earlier_sum(acc, at, first):
    """The f32 sum of the earlier chunks at the tile `at`: zeros for the `first` chunk
    (compile-time), else that tile of the f32 accumulator `acc`."""
    return tile.zeros(at.shape, fl.f32) if first else tile.load_like(acc, at)


@tile.function
def earlier_low(acc, first):
    """`earlier_sum` of a low-precision accumulator, the Part `acc` itself: its own tile,
    widened to f32."""
    return tile.zeros(acc.shape, fl.f32) if first else tile.load_like(acc, acc).astype(fl.f32)


@tile.function
def dw_tile(g, a, i, j, acc, BK):
    """acc + tile (i, j) of g^T @ a: g (M, V) is loaded transposed, (BM, BK) tiles of g^T."""
    BM, BN = acc.shape
    for k in range(tile.num_tiles(g, 0, (BK, BM))):
        gt = tile.load(g, (i, k), (BM, BK), order=(1, 0))
        acc = tile.mma(gt, tile.load(a, (k, j), (BK, BN)), acc)
    return acc


def make_dw(dt, odt, first, last):
    """dW (V, H) += G (M, V)^T @ h (M, H): one block per (BM, BN) tile. Not `last`: the Part is
    the accumulator itself (zeros first when `first`), f32, or the gradient in a low-precision
    `odt` that every chunk adds into; `last`: the Part is the gradient in `odt`, and `acc`
    (read unless `first`) the f32 accumulator of the earlier chunks."""
    if not last and odt != fl.f32:

        @tile.kernel
        def dw_into(
            acc: tile.Part[odt], g: tile.Tensor[dt], a: tile.Tensor[dt], BK: tile.Const[int]
        ):
            i, j = acc.index
            acc.store(dw_tile(g, a, i, j, earlier_low(acc, first), BK).astype(odt))

        return dw_into
    if not last:

        @tile.kernel
        def dw_add(
            acc: tile.Part[fl.f32], g: tile.Tensor[dt], a: tile.Tensor[dt], BK: tile.Const[int]
        ):
            i, j = acc.index
            acc.store(dw_tile(g, a, i, j, earlier_sum(acc, acc, first), BK))

        return dw_add

    @tile.kernel
    def dw_out(
        out: tile.Part[odt], acc: tile.Tensor[fl.f32], g: tile.Tensor[dt], a: tile.Tensor[dt],
        BK: tile.Const[int],
    ):  # fmt: skip
        i, j = out.index
        out.store(dw_tile(g, a, i, j, earlier_sum(acc, out, first), BK).astype(odt))

    return dw_out


@tile.function
def column_sums(g, j, acc, TM):
    """acc + the sums of g's columns of tile j, (BN,), over its rows in steps of TM."""
    (BN,) = acc.shape
    rows = tile.zeros((TM, BN), fl.f32)
    for k in range(tile.num_tiles(g, 0, (TM, BN))):
        rows = rows + tile.load(g, (k, j), (TM, BN), allow_tma=False).astype(fl.f32)
    return acc + tile.sum(rows, axis=0)


def make_db(dt, odt, first, last):
    """db (V,) += the column sums of G (M, V); the forms of `make_dw`."""
    if not last and odt != fl.f32:

        @tile.kernel
        def db_into(acc: tile.Part[odt], g: tile.Tensor[dt], TM: tile.Const[int]):
            start = earlier_low(acc, first)
            acc.store(column_sums(g, acc.index[0], start, TM).astype(odt))

        return db_into
    if not last:

        @tile.kernel
        def db_add(acc: tile.Part[fl.f32], g: tile.Tensor[dt], TM: tile.Const[int]):
            start = earlier_sum(acc, acc, first)
            acc.store(column_sums(g, acc.index[0], start, TM))

        return db_add

    @tile.kernel
    def db_out(
        out: tile.Part[odt], acc: tile.Tensor[fl.f32], g: tile.Tensor[dt], TM: tile.Const[int]
    ):
        start = earlier_sum(acc, out, first)
        out.store(column_sums(g, out.index[0], start, TM).astype(odt))

    return db_out


# ------------------------------------------------------------------------------ loss


def make_loss_sum(odt, TN):
    """out (1,) = factor * the sum of the per-row losses (n,) f32, in one block (the same
    order every run: deterministic)."""

    @tile.kernel
    def loss_sum(out: tile.Part[odt], loss: tile.Tensor[fl.f32], factor: fl.f32):
        acc = tile.zeros((TN,), fl.f32)
        for k in range(tile.num_tiles(loss, 0, (TN,))):
            acc = acc + tile.load(loss, (k,), (TN,), allow_tma=False)
        out.store((tile.sum(acc, axis=0, keepdims=True) * factor).astype(odt))

    return loss_sum


# -------------------------------------------------------------------------- launches


def _gemm(shape, BK, occupancy, num_ctas=None):
    return dict(shape=shape, BK=BK, occupancy=occupancy, num_ctas=num_ctas)


# The first configuration (FEARLESS_AUTOTUNE=0) fits every shape.
LCE_GEMM_CONFIGS = [
    _gemm((128, 128), 64, 2),
    _gemm((128, 128), 64, 1),
    _gemm((128, 256), 64, 1),
    _gemm((256, 128), 64, 1),
    _gemm((64, 128), 64, 2),
    # large tiles over clusters of 2 (TileGym's SM90 GEMM spaces, matmul's GEMM_CONFIGS)
    _gemm((256, 128), 64, None, 2),
    _gemm((128, 256), 64, None, 2),
    _gemm((256, 256), 64, 1, 2),
]


def _logits_key(a, w, *_, **__):
    """(M's size class, H, V): M, the chunk's tokens, varies between calls."""
    return size_class(a.shape[0]), a.shape[1], w.shape[0]


def _dw_key(g, a, *_, **__):
    """(M's size class, V, H)."""
    return size_class(g.shape[0]), g.shape[1], a.shape[1]


def _logits_prune(configs, a, w, *_, **__):
    return clustered(fitting_tiles(configs, a.shape[0], w.shape[0]), a.shape[0])


def _dw_prune(configs, g, a, *_, **__):
    return clustered(fitting_tiles(configs, g.shape[1], a.shape[1]), g.shape[1])


@fl.autotune(configs=LCE_GEMM_CONFIGS, key=_logits_key, prune=_logits_prune)
def logits_tuned(a, w, b, out, has_bias, *, shape, BK, occupancy, num_ctas):
    """out (M, V) = a (M, H) @ w (V, H)^T (+ b)."""
    kernel = kernel_of(make_logits, a.dtype, has_bias)
    num_ctas = dividing_cluster(out.shape[0], shape[0], num_ctas)
    kernel = kernel.options(occupancy=occupancy, num_ctas=num_ctas)
    with out.partition(shape, order=tile.grouped(8)) as part:
        kernel(part, a, w, b, BK)


def dw_launch(g, a, acc, out, first, last, config):
    """One chunk's dW: into `acc` (f32; or the gradient itself in its dtype, which every
    chunk adds into), or (`last`) into `out` in its dtype from the f32 `acc`."""
    shape, BK = config["shape"], config["BK"]
    target = out if last else acc
    kernel = kernel_of(make_dw, g.dtype, target.dtype, first, last)
    num_ctas = dividing_cluster(target.shape[0], shape[0], config["num_ctas"])
    kernel = kernel.options(occupancy=config["occupancy"], num_ctas=num_ctas)
    with target.partition(shape, order=tile.grouped(8)) as part:
        if last:
            kernel(part, acc, g, a, BK)
        else:
            kernel(part, g, a, BK)


@fl.autotune(configs=LCE_GEMM_CONFIGS, key=_dw_key, restore_value=["acc"], prune=_dw_prune)
def dw_tuned(g, a, acc, out, first, last, **config):
    """dW += g (M, V)^T @ a (M, H); see `dw_launch` (`acc` is restored between the tuner's
    calls: not `last`, the kernel adds into it)."""
    dw_launch(g, a, acc, out, first, last, config)


DB_TILE = (64, 256)  # (rows summed per step, columns per block)


def db_launch(g, acc, out, first, last):
    """One chunk's db: into `acc` (f32, or the gradient itself), or (`last`) into `out` in its
    dtype; the forms of `dw_launch`."""
    tm, tn = DB_TILE
    target = out if last else acc
    kernel = kernel_of(make_db, g.dtype, target.dtype, first, last)
    with target.partition((min(tn, next_pow2(target.shape[0])),)) as part:
        if last:
            kernel(part, acc, g, tm)
        else:
            kernel(part, g, tm)


def _ce(rows, chunk, occupancy=None, lanes=False):
    return dict(rows=rows, chunk=chunk, occupancy=occupancy, lanes=lanes)


# A chunk of 4096 rows of 128256 bf16 logits (H100, bench/experiments/lce_parts.py): 1.45 ms
# at (1, 1024, occupancy 8), 2.2 TB/s over the kernel's three passes; 1.59 to 1.92 with the
# lanes' log-sum-exp; 2.75 to 3.88 ms with one or two blocks a SM (the earlier list).
CE_CONFIGS = [
    _ce(1, 1024, 8),
    _ce(1, 2048, 4),
    _ce(1, 2048, 4, True),
    _ce(1, 512, 16),
    _ce(1, 1024, 16),
    _ce(2, 1024, 8),
    _ce(1, 4096, 2),
    _ce(1, 4096),
]


def _ce_key(x, *_, **__):
    return size_class(x.shape[0]), x.shape[1]


@fl.autotune(configs=CE_CONFIGS, key=_ce_key, restore_value=["x"])
def cross_entropy_tuned(
    x, loss, target, scale, ignore_index, grads, *, rows, chunk, occupancy, lanes
):
    """loss[r] and (with `grads`) the logits' gradient in place, for each row r of x (x is
    restored between the tuner's calls)."""
    n = next_pow2(x.shape[1])
    ch = min(chunk, n)
    kernel = kernel_of(make_cross_entropy, x.dtype, loss.dtype, ch, grads, lanes)
    kernel = kernel.options(occupancy=occupancy)
    with x.partition((rows, n)) as xp, loss.partition((rows,)) as lp:
        kernel(xp, lp, target, scale, ignore_index)


LOSS_TILE = 1024


def loss_sum(loss, out, factor):
    """out (1,) = factor * sum(loss)."""
    tn = min(LOSS_TILE, next_pow2(loss.shape[0]))
    with out.partition((1,)) as part:
        kernel_of(make_loss_sum, out.dtype, tn)(part, loss, factor)
