"""Tile kernels with indexed loads, stores and atomics (gathers, scatters, histograms): shared by
tests/test_tile_indexed.py and tests/gpu/test_tile_indexed_gpu.py."""

from __future__ import annotations

import numpy as np

import fearless as fl
from fearless import tile


@tile.kernel
def histogram(x: tile.Tensor[fl.i32], counts: tile.Atomic[fl.i32], N: tile.Const[int]):
    v = tile.load(x, (tile.block_id(0),), (N,))
    tile.atomic_add(counts, v, 1)  # values outside counts are dropped


@tile.kernel
def take_rows(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], rows: tile.Tensor[fl.i32]):
    """out[r, c] = x[rows[r], c]; rows outside x read -1 (an embedding lookup)."""
    BM, BN = out.shape
    i, j = out.index
    r = tile.load(rows, (i,), (BM,))
    c = tile.arange(BN) + j * BN
    out.store(tile.gather(x, (r[:, None], c[None, :]), padding=-1.0))


@tile.kernel
def gather_masked(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], n: fl.i32):
    (B,) = out.shape
    k = tile.arange(B) + out.index[0] * B
    out.store(tile.gather(x, k * 2, mask=k < n, padding=0.0))  # x[2k] for k < n, else 0


@tile.kernel
def permute_into(out: tile.Atomic[fl.f32], x: tile.Tensor[fl.f32], perm: tile.Tensor[fl.i32]):
    i = tile.block_id(0)
    p = tile.load(perm, (i,), (16,))
    tile.scatter(out, p, tile.load(x, (i,), (16,)), mask=p != 3)  # out[perm] = x but slot 3


@tile.kernel
def old_values(
    old: tile.Part[fl.i32], a: tile.Atomic[fl.i32], upd: tile.Tensor[fl.i32], kind: tile.Const[int]
):
    (B,) = old.shape
    idx = tile.arange(B) % 4  # every slot of `a` four times, in row-major order
    v = tile.load_like(upd, old)
    if kind == 0:
        r = tile.atomic_max(a, idx, v)
    elif kind == 1:
        r = tile.atomic_min(a, idx, v)
    elif kind == 2:
        r = tile.atomic_xchg(a, idx, v)
    elif kind == 3:
        r = tile.atomic_and(a, idx, v)
    elif kind == 4:
        r = tile.atomic_or(a, idx, v)
    elif kind == 5:
        r = tile.atomic_xor(a, idx, v)
    else:
        r = tile.atomic_add(a, idx, v)
    old.store(r)


@tile.kernel
def take_tickets(tickets: tile.Part[fl.i32], counter: tile.Atomic[fl.i32]):
    """Each block takes the counter's value with a CAS retry loop unrolled 4 times."""
    got = tile.full((), -1, fl.i32)
    for _ in range(4):
        seen = tile.atomic_add(counter, 0, 0)
        won = tile.atomic_cas(counter, 0, seen, seen + 1, mask=got < 0)
        got = tile.where((got < 0) & (won == seen), seen, got)
    tickets.store(tile.full((1,), 0, fl.i32) + got)


@tile.kernel
def float_sums(total: tile.Atomic[fl.f32], half: tile.Atomic[fl.bf16], x: tile.Tensor[fl.f32]):
    v = tile.load(x, (tile.block_id(0),), (64,))
    tile.atomic_add(total, 0, tile.sum(v, axis=0))
    tile.atomic_add(half, tile.arange(64) % 2, v.astype(fl.bf16))


@tile.kernel
def reverse(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    """out = x[::-1], each block writing the mirror of its own tile: another block's."""
    (B,) = out.shape
    i = tile.arange(B) + out.index[0] * B
    v = tile.gather(x, i)
    with tile.unsafe():
        tile.scatter(out, x.shape[0] - 1 - i, v)


@tile.kernel
def relaxed_tile_sums(acc: tile.Atomic[fl.f32], x: tile.Tensor[fl.f32]):
    """Each block adds its (16, 16) tile of x into acc's one (16, 16) tile, as a
    FlashAttention-2 dQ accumulates: relaxed adds (only the final sum is read), then one
    acquire-ordered read of acc[0, 0] and a release-ordered CAS that takes nothing."""
    v = tile.load(x, (tile.block_id(0), 0), (16, 16))
    rows, cols = tile.arange(16)[:, None], tile.arange(16)[None, :]
    tile.atomic_add(acc, (rows, cols), v, memory_order="relaxed")
    seen = tile.atomic_add(acc, (0, 0), 0.0, memory_order=tile.MemoryOrder.ACQUIRE)
    tile.atomic_cas(acc, (0, 0), seen - seen - 1.0, 5.0, memory_order="release")


@tile.kernel
def column_sums(out: tile.Atomic[fl.f32], x: tile.Tensor[fl.f32], TM: tile.Const[int]):
    """Block (i, j) adds the column sums of x's (TM, 16) tile (i, j) into tile (0, j) of out's
    (1, 16) tiles with one `tile.atomic_store_add`: every row block adds into the same tile,
    and the tile past out's last column drops its outside part."""
    i, j = tile.block_id(0), tile.block_id(1)
    t = tile.load(x, (i, j), (TM, 16))
    tile.atomic_store_add(out, (0, j), tile.sum(t, axis=0).reshape((1, 16)))


@tile.kernel
def half_tiles(out: tile.Atomic[fl.f16], x: tile.Tensor[fl.f16]):
    """Every block adds x's first (8, 8) tile into out's tile (1, 0), its index computed from
    the block id: f16 adds, each rounded to f16."""
    b = tile.block_id(0)
    tile.atomic_store_add(out, (1, b - b), tile.load(x, (0, 0), (8, 8)))


def check_half_tiles() -> None:
    """`half_tiles` from three blocks into a cache of 1000s: each f16 add of 1/3 rounds (on the
    simulator as the GPU's f16 atomics), and the tiles outside the index stay 1000."""
    x = fl.asarray(np.full((8, 8), 1 / 3, np.float16))
    out = fl.asarray(np.zeros((16, 8), np.float16) + np.float16(1000))
    half_tiles.launch(3, out, x)
    want = np.float16(1000)
    for _ in range(3):
        want = np.float16(want + np.float16(1 / 3))
    got = out.numpy()
    assert np.all(got[8:] == want) and np.all(got[:8] == np.float16(1000))


@tile.kernel
def tile_bits(
    mx: tile.Atomic[fl.i32],
    mn: tile.Atomic[fl.u32],
    bits: tile.Atomic[fl.i64],
    x: tile.Tensor[fl.i32],
):
    """Block i folds x's (4, 16) tile i into tile (0, 0) of each output, one
    `tile.atomic_store_<mode>` each: max into i32, min into u32, and or / and / xor into the
    three rows of an i64 (3, 16) (each row its own tile of one row)."""
    i = tile.block_id(0)
    t = tile.load(x, (i, 0), (4, 16))
    tile.atomic_store_max(mx, (0, 0), t)
    tile.atomic_store_min(mn, (0, 0), t.astype(fl.u32))
    w = tile.extract(t.astype(fl.i64), (0, 0), (1, 16))  # the tile's first row
    tile.atomic_store_or(bits, (0, 0), w)
    tile.atomic_store_and(bits, (1, 0), w)
    tile.atomic_store_xor(bits, (2, 0), w)


def check_tile_bits(blocks: int, seed: int, span: int) -> None:
    """`tile_bits` over `blocks` blocks of values in [-span, span), against NumPy: max (i32),
    min (u32: the negative values are large), or, and, xor (i64); the final values do not
    depend on the order the blocks' updates land in."""
    x = np.random.default_rng(seed).integers(-span, span, (4 * blocks, 16)).astype(np.int32)
    mx = fl.asarray(np.full((4, 16), -(2**31), np.int32))
    mn = fl.asarray(np.full((4, 16), 2**32 - 1, np.uint32))
    start = np.zeros((3, 16), np.int64)
    start[1] = -1  # and's identity
    bits = fl.asarray(start)
    tile_bits.launch(blocks, mx, mn, bits, fl.asarray(x))
    tiles = x.reshape(blocks, 4, 16)
    assert np.array_equal(mx.numpy(), tiles.max(0))
    assert np.array_equal(mn.numpy(), tiles.astype(np.uint32).min(0))
    rows = tiles[:, 0].astype(np.int64)
    want = [np.bitwise_or.reduce(rows), np.bitwise_and.reduce(rows), np.bitwise_xor.reduce(rows)]
    assert np.array_equal(bits.numpy(), np.stack(want))
