"""The Tile kernels behind `fearless.ops.moe_align_block_size` and `fearless.ops.fused_moe`
(TileGym's mixture of experts), and their launches.

The (token, k) slots are numbered s = token * top_k + k, as TileGym flattens topk_ids.
  - `moe_count` (one block per expert) counts the slots routed to its expert;
  - `moe_place` (one block per expert, on a host grid) writes its expert's slots, in slot
    order, at their places in `sorted_ids` (its group starts at the sum of the earlier
    experts' counts rounded up to the block size), its group's blocks' expert id into
    `expert_ids`, and each slot's place into `inv` (the inverse permutation); block 0 writes
    the cumulative padded counts, their total and the largest count. These writes go through
    `tile.Atomic` scatters: each place and each block is its expert's alone, by the counts.
    An id outside [0, E) is counted by no block and placed nowhere: its slot's place in `inv`
    stays past the end, so the sum below reads 0 for it. Block 0 records the smallest such
    slot in err[0] (an atomic min), which the operator raises at the next synchronisation
    (ops/_device_checks.py). Both kernels read the ids in their own dtype, i32 or i64;
  - `moe_gate_up` is the first grouped GEMM, in sorted order: block (i, j) owns rows
    i*BM.. of the sorted intermediate (a `Part`), reads its expert from `expert_ids[i]`,
    gathers its slots' token rows of the hidden states (`tile.gather`, bounds-checked: the
    padding sentinel's row is past the last token and reads 0) and multiplies them by the
    expert's gate and up halves of w1, then stores silu(gate) * up;
  - `moe_down` multiplies the sorted intermediate by the expert's w2 and by each slot's
    routing weight (gathered by slot; the sentinel reads 0), into a sorted (EM, H) `Part`;
  - `moe_sum` owns a tile of the (tokens, H) output and adds its tokens' top_k rows of the
    sorted result, found through `inv`: a reduction with no write race, no atomics.
Blocks past the padded total (`num_tokens_post_padded`, read in the kernel) run no K step
and store zeros.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile

from .kernels_activation import silu_f32
from .kernels_rows import kernel_of, next_pow2, size_class

CHUNK = 1024  # slots read per step by the align kernels


@tile.function
def expert_ids_i32(ids, c, STEP):
    """Chunk c of the flat ids (i32 or i64) as i32 expert numbers: -1 past the end and for an id
    no i32 holds (so that narrowing never wraps a bad id onto a good one)."""
    v = tile.load(ids, (c,), (STEP,), padding=-1)
    return tile.where((v < 0) | (v > 2**31 - 1), -1, v).astype(fl.i32)


@tile.function
def fill_share(t, value, e, STEP):
    """Block e of the grid writes `value` over its share of the 1-D `t`: chunks e, e + blocks,
    e + 2 blocks, ... of STEP elements."""
    blocks = tile.num_blocks(0)
    for c in range(tile.cdiv(t.shape[0], STEP * blocks)):
        pos = (c * blocks + e) * STEP + tile.arange(STEP)
        tile.scatter(t, pos, value, mask=pos < t.shape[0])


def make_moe_count(idt):
    """The counting kernel over flat ids of dtype `idt` (i32 or i64, as topk_ids come)."""

    @tile.kernel
    def moe_count(
        counts: tile.Part[fl.i32],
        sorted_ids: tile.Atomic[fl.i32],
        expert_ids: tile.Atomic[fl.i32],
        inv: tile.Atomic[fl.i32],
        ids: tile.Tensor[idt],
        STEP: tile.Const[int],
    ):
        """counts[e] = how many of the slots' expert ids are e (one block per expert); the
        blocks also fill sorted_ids with the sentinel (the slots' count), expert_ids with -1
        and inv with sorted_ids' length, which `moe_place` then writes over where it places."""
        e = counts.index[0]
        fill_share(sorted_ids, ids.shape[0], e, STEP)
        fill_share(expert_ids, -1, e, STEP)
        fill_share(inv, sorted_ids.shape[0], e, STEP)
        n = tile.zeros((1,), fl.i32)
        for c in range(tile.num_tiles(ids, 0, (STEP,))):
            v = expert_ids_i32(ids, c, STEP)
            n = n + tile.sum(tile.where(v == e, 1, 0), axis=0, keepdims=True)
        counts.store(n)

    return moe_count


def make_moe_place(idt):
    """The placing kernel over flat ids of dtype `idt` (i32 or i64)."""

    @tile.kernel
    def moe_place(
        sorted_ids: tile.Atomic[fl.i32],
        expert_ids: tile.Atomic[fl.i32],
        inv: tile.Atomic[fl.i32],
        cumsum: tile.Atomic[fl.i32],
        post_pad: tile.Atomic[fl.i32],
        max_cnt: tile.Atomic[fl.i32],
        err: tile.Atomic[fl.i32],
        counts: tile.Tensor[fl.i32],
        ids: tile.Tensor[idt],
        BLOCK: tile.Const[int],
        EP: tile.Const[int],
        STEP: tile.Const[int],
    ):
        """Block e places expert e's slots (see the module docstring); EP >= E a power of two.
        Block 0 also records the smallest slot whose id is outside [0, E) in err[0]."""
        e = tile.block_id(0)
        experts = tile.arange(EP)
        c = tile.load(counts, (0,), (EP,))  # 0 past E
        padded = (c + (BLOCK - 1)) // BLOCK * BLOCK
        ends = tile.cumsum(padded, axis=0)
        mine = experts == e
        size = tile.sum(tile.where(mine, padded, 0))
        start = tile.sum(tile.where(mine, ends, 0)) - size
        seen = 0
        for ch in range(tile.num_tiles(ids, 0, (STEP,))):
            v = expert_ids_i32(ids, ch, STEP)
            hit = v == e
            ones = tile.where(hit, 1, 0)
            pos = start + seen + tile.cumsum(ones, axis=0) - 1  # slot order within the expert
            slot = ch * STEP + tile.arange(STEP)
            tile.scatter(sorted_ids, pos, slot, mask=hit)
            tile.scatter(inv, slot, pos, mask=hit)
            seen = seen + tile.sum(ones)
            if e == 0:
                bad = ((v < 0) | (v >= counts.shape[0])) & (slot < ids.shape[0])
                tile.atomic_min(err, slot * 0, slot, mask=bad)
        first = start // BLOCK
        nblocks = size // BLOCK
        for b in range((nblocks + (STEP - 1)) // STEP):
            blk = b * STEP + tile.arange(STEP)
            tile.scatter(expert_ids, first + blk, e, mask=blk < nblocks)
        if e == 0:
            tile.scatter(cumsum, tile.arange(1), 0)
            tile.scatter(cumsum, experts + 1, ends, mask=experts < counts.shape[0])
            tile.scatter(post_pad, tile.arange(1), tile.sum(padded, axis=0, keepdims=True))
            most = tile.max(tile.load(counts, (0,), (EP,), padding=-1), axis=0, keepdims=True)
            tile.scatter(max_cnt, tile.arange(1), most)

    return moe_place


def align_launch(ids, counts, sorted_ids, expert_ids, inv, cumsum, post_pad, max_cnt, err, block):
    """The two align kernels over the flat `ids` (fl.Tensors; i32 or i64 ids; at least one;
    the outputs as allocated: the kernels write every element; err's first word NO_ERROR)."""
    experts = counts.shape[0]
    step = min(CHUNK, next_pow2(max(ids.shape[0], 1)))
    with counts.partition((1,)) as part:
        kernel_of(make_moe_count, ids.dtype)(part, sorted_ids, expert_ids, inv, ids, step)
    kernel_of(make_moe_place, ids.dtype).launch(
        experts, sorted_ids, expert_ids, inv, cumsum, post_pad, max_cnt, err, counts, ids,
        block, next_pow2(experts), step,
    )  # fmt: skip


@tile.function
def sorted_block(post_pad, expert_ids, i, BM):
    """(live, e) of block i of BM sorted slots: live is 1 below the padded total, else 0 (the
    block runs no K step), and e its expert (0 for a block past the total, whose id is -1)."""
    live = min(1, max(0, tile.load(post_pad, (0,), (1,)).item() - i * BM))
    e = max(tile.load(expert_ids, (i,), (1,)).item(), 0)
    return live, e


@tile.function
def gate_up_step(x, w1, rows, cols, e, k, j, gate, up, BK, BN):
    """(gate, up) with K step k of the first grouped GEMM added: x's token rows `rows` and
    columns `cols` (gathered) times expert e's gate and up halves of w1 (E, 2, I, H), tile j."""
    a = tile.gather(x, (rows, cols))  # a sentinel's row is past the tokens: 0
    g = tile.load(w1, (e, 0, k, j), (1, 1, BK, BN), order=(0, 1, 3, 2))
    u = tile.load(w1, (e, 1, k, j), (1, 1, BK, BN), order=(0, 1, 3, 2))
    gate = tile.mma(a, g.reshape((BK, BN)), gate)
    up = tile.mma(a, u.reshape((BK, BN)), up)
    return gate, up


def make_moe_gate_up(dt):
    """out (EM, I) = silu(x[rows] @ gate^T) * (x[rows] @ up^T), the rows and expert of each
    block of BM sorted slots from sorted_ids and expert_ids; w1 viewed (E, 2, I, H)."""

    @tile.kernel
    def moe_gate_up(
        out: tile.Part[dt],
        x: tile.Tensor[dt],
        w1: tile.Tensor[dt],
        sorted_ids: tile.Tensor[fl.i32],
        expert_ids: tile.Tensor[fl.i32],
        post_pad: tile.Tensor[fl.i32],
        TOPK: tile.Const[int],
        BK: tile.Const[int],
    ):
        BM, BN = out.shape
        i, j = out.index
        live, e = sorted_block(post_pad, expert_ids, i, BM)
        rows = (tile.load(sorted_ids, (i,), (BM,), padding=-1) // TOPK)[:, None]
        gate = tile.zeros((BM, BN), fl.f32)
        up = tile.zeros((BM, BN), fl.f32)
        for k in range(tile.num_tiles(x, 1, (BM, BK)) * live):
            cols = (k * BK + tile.arange(BK))[None, :]
            gate, up = gate_up_step(x, w1, rows, cols, e, k, j, gate, up, BK, BN)
        out.store((silu_f32(gate) * up).astype(dt))

    return moe_gate_up


def make_moe_down(dt, wdt):
    """out (EM, H) = (a[block] @ w2[e]^T) * topk_weights[slot] per block of BM sorted slots,
    the routing weights read in their dtype `wdt` (a model's, often the activations') and
    applied in f32."""

    @tile.kernel
    def moe_down(
        out: tile.Part[dt],
        a: tile.Tensor[dt],
        w2: tile.Tensor[dt],
        sorted_ids: tile.Tensor[fl.i32],
        expert_ids: tile.Tensor[fl.i32],
        post_pad: tile.Tensor[fl.i32],
        weights: tile.Tensor[wdt],
        BK: tile.Const[int],
    ):
        BM, BN = out.shape
        i, j = out.index
        live, e = sorted_block(post_pad, expert_ids, i, BM)
        acc = tile.zeros((BM, BN), fl.f32)
        for k in range(tile.num_tiles(a, 1, (BM, BK)) * live):
            w = tile.load(w2, (e, k, j), (1, BK, BN), order=(0, 2, 1)).reshape((BK, BN))
            acc = tile.mma(tile.load(a, (i, k), (BM, BK)), w, acc)
        slots = tile.load(sorted_ids, (i,), (BM,), padding=-1)
        wt = tile.gather(weights, slots).astype(fl.f32)  # the sentinel (past the slots) reads 0
        out.store((acc * wt[:, None]).astype(dt))

    return moe_down


def make_moe_sum(dt):
    """out (T, H)[t] = the sum over k of y (EM, H)[inv[t * TOPK + k]], in f32."""

    @tile.kernel
    def moe_sum(
        out: tile.Part[dt], y: tile.Tensor[dt], inv: tile.Tensor[fl.i32], TOPK: tile.Const[int]
    ):
        BT, BN = out.shape
        i, j = out.index
        tokens = i * BT + tile.arange(BT)
        cols = (j * BN + tile.arange(BN))[None, :]
        acc = tile.zeros((BT, BN), fl.f32)
        for k in range(TOPK):
            pos = tile.gather(inv, tokens * TOPK + k, padding=-1)
            acc = acc + tile.gather(y, (pos[:, None], cols)).astype(fl.f32)
        out.store(acc.astype(dt))

    return moe_sum


def _moe_config(bn, bk, occupancy):
    return dict(bn=bn, bk=bk, occupancy=occupancy)


MOE_CONFIGS = [
    _moe_config(64, 64, 2),
    _moe_config(128, 64, 1),
    _moe_config(128, 64, 2),
    _moe_config(64, 32, 4),
    _moe_config(256, 64, 1),
]


def _gemm_key(out, a, *rest, **__):
    """The sorted rows' size class, the block (BM, the last argument) and the GEMM's N, K."""
    return size_class(out.shape[0]), rest[-1], out.shape[1], a.shape[1]


@fl.autotune(configs=MOE_CONFIGS, key=_gemm_key)
def gate_up_tuned(out, x, w1, sorted_ids, expert_ids, post_pad, topk, block, *, bn, bk,
                  occupancy):  # fmt: skip
    """out (EM, I) = the first grouped GEMM and SiLU-and-mul (w1 viewed (E, 2, I, H))."""
    kernel = kernel_of(make_moe_gate_up, x.dtype).options(occupancy=occupancy)
    with out.partition((block, min(bn, next_pow2(out.shape[1])))) as part:
        kernel(part, x, w1, sorted_ids, expert_ids, post_pad, topk, bk)


@fl.autotune(configs=MOE_CONFIGS, key=_gemm_key)
def down_tuned(out, a, w2, sorted_ids, expert_ids, post_pad, weights, block, *, bn, bk,
               occupancy):  # fmt: skip
    """out (EM, H) = the second grouped GEMM, times each slot's routing weight."""
    kernel = kernel_of(make_moe_down, a.dtype, weights.dtype).options(occupancy=occupancy)
    with out.partition((block, min(bn, next_pow2(out.shape[1])))) as part:
        kernel(part, a, w2, sorted_ids, expert_ids, post_pad, weights, bk)


def sum_launch(out, y, inv, topk):
    """out (T, H) = each token's top_k rows of y summed (f32 sums)."""
    kernel = kernel_of(make_moe_sum, y.dtype)
    with out.partition((16, min(256, next_pow2(out.shape[1])))) as part:
        kernel(part, y, inv, topk)
