"""The Tile kernels behind `fearless.ops.gemma_attention_decode` (Gemma's one-token decode with
a logit soft cap and a sliding window), and their launches.

They are the split-KV decode of ops/kernels_attention_decode.py (`decode_keys`, its combine kernel,
its split sizing) with that loop's compile-time Gemma flags on: block (b, kv_h[, split]) takes
the query heads of KV head kv_h as one tile, keys-major. The window's first key LO = S - 1 -
window_size (the query sits at S - 1) is a run-time value: the blocks walk only the key tiles
from LO's tile on, so every split holds a key the query sees (no split is all masked: no
0 / 0), and the keys of LO's tile before LO are masked.

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile

from .kernels_attention import INV_LOG_2
from .kernels_attention_decode import (
    DECODE_CONFIGS,
    decode_keys,
    decode_splits,
    decode_store,
    split_kv_launch,
    split_store,
)
from .kernels_rows import size_class


def make_gemma_decode_one(dt, windowed, capped, **hints):
    """One split: block (b, kv_h) walks the key tiles from LO's on and stores its heads'
    output. `windowed` / `capped`: compile-time (`decode_keys`' flags)."""

    @tile.kernel(**hints)
    def gemma_decode_one(
        out: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        qk_scale: fl.f32,
        cap: fl.f32,
        lo: fl.i32,
        TILE_N: tile.Const[int],
    ):
        _, _, QG, TILE_D = out.shape
        b, kv_h, _, _ = out.index
        first = lo // TILE_N
        tiles = tile.cdiv(k.shape[2], TILE_N) - first
        acc, _, l_i = decode_keys(
            q, k, v, b, kv_h, first, tiles, QG, TILE_N, TILE_D, qk_scale, dt, lo, cap, windowed,
            capped,
        )  # fmt: skip
        decode_store(out, acc, l_i, QG, TILE_D, dt, False)

    return gemma_decode_one


def make_gemma_decode_split(dt, windowed, capped, **hints):
    """The split kernel: block (b, kv_h, split) walks SPLIT_TILES key tiles from LO's tile +
    split * SPLIT_TILES and stores its partial output and log2-sum-exp."""

    @tile.kernel(**hints)
    def gemma_decode_split(
        part_o: tile.Part[fl.f32],
        part_lse: tile.Part[fl.f32],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        qk_scale: fl.f32,
        cap: fl.f32,
        lo: fl.i32,
        TILE_N: tile.Const[int],
        SPLIT_TILES: tile.Const[int],
    ):
        _, _, _, QG, TILE_D = part_o.shape
        b, kv_h, sp, _, _ = part_o.index
        first = lo // TILE_N + sp * SPLIT_TILES
        acc, m_i, l_i = decode_keys(
            q, k, v, b, kv_h, first, SPLIT_TILES, QG, TILE_N, TILE_D, qk_scale, dt, lo, cap,
            windowed, capped,
        )  # fmt: skip
        split_store(part_o, part_lse, acc, m_i, l_i, QG, TILE_D, False)

    return gemma_decode_split


def _gemma_key(q, k, v, out, scale, cap, lo, *_, **__):
    b, hk, group, d = q.shape
    return size_class(b * hk), group, size_class(k.shape[2] - lo), d, cap is not None, lo > 0


@fl.autotune(configs=DECODE_CONFIGS, key=_gemma_key)
def gemma_decode(q, k, v, out, scale, cap, lo, sm_count, *, tile_n, occupancy, waves):
    """out = Gemma's decode of q (B, H_kv, GROUP, D: one query per head, grouped by KV head)
    over the keys lo.. of k, v (B, H_kv, S, D), soft-capped by `cap` (None: no cap), split
    across blocks; `out` shaped as q."""
    b, hk, _, _ = q.shape
    keys = k.shape[2] - lo // tile_n * tile_n
    splits, split_tiles = decode_splits(b, hk, keys, tile_n, waves * sm_count)
    gemma_decode_launch(q, k, v, out, scale, cap, lo, tile_n, occupancy, splits, split_tiles)


def gemma_decode_split(q, k, v, out, scale, cap, lo, split_len):
    """`gemma_decode` with `split_len` keys per split (TileGym's kv_len_per_split, a power of
    two of 16 or more), the split pinned instead of tuned."""
    tile_n = min(128, split_len)
    splits = -(-(k.shape[2] - lo // tile_n * tile_n) // split_len)
    gemma_decode_launch(q, k, v, out, scale, cap, lo, tile_n, 2, splits, split_len // tile_n)


def gemma_decode_launch(q, k, v, out, scale, cap, lo, tile_n, occupancy, splits, split_tiles):
    """One kernel where one split covers the keys from LO's tile on, else the split kernel and
    the combine of ops/kernels_attention_decode.py."""
    flags = (q.dtype, lo > 0, cap is not None)
    if cap is None:
        qk_scale, cap2 = scale * INV_LOG_2, 1.0
    else:
        qk_scale, cap2 = scale / cap, cap * INV_LOG_2
    args = (q, k, v, qk_scale, cap2, lo, tile_n)
    split_kv_launch(q, out, make_gemma_decode_one, make_gemma_decode_split, flags, args,
                    occupancy, splits, split_tiles)  # fmt: skip
