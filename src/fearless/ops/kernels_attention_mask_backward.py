"""The masked form of flash attention's backward (`fearless.ops.scaled_dot_product_attention`
with an `attn_mask`): the signatures of its three Tile kernels, which take the user's mask
(1 or B, 1 or H, L, S), bool or the inputs' dtype, as one more tensor, around the bodies
kernels_attention_backward.py's factories pass in (`stats`, `dkdv`, `dq_rows`, where the mask
is applied to each recomputed score tile by the forward's own `user_masked`).

This module is kernel source: its kernels' annotations are the DSL's (pyproject's mypy
override).
"""

import fearless as fl
from fearless import tile


def mask_flags(mask, variant):
    """(masked, mask_bool, mask_b, mask_h) of a `mask` form (make_attention's (is_bool, batch,
    heads); None: none); a mask form takes no variant."""
    if mask is None:
        return False, False, False, False
    assert variant is None, "a mask form takes no variant"
    return (True, *mask)


def masked_stats(stats, dt, mask_bool, **hints):
    """The masked stats kernel (lse and delta of (B, H, L), f32) around the body `stats`."""
    mdt = fl.bool_ if mask_bool else dt

    @tile.kernel(**hints)
    def masked_attention_stats(
        lse: tile.Part[fl.f32],
        delta: tile.Part[fl.f32],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        out: tile.Tensor[dt],
        dout: tile.Tensor[dt],
        m: tile.Tensor[mdt],
        scale: fl.f32,
        TILE_N: tile.Const[int],
        TILE_D: tile.Const[int],
        GROUP: tile.Const[int],
    ):
        stats(
            lse, delta, q, k, out, dout, None, None, m, scale, None, None, None, TILE_N, TILE_D,
            GROUP,
        )  # fmt: skip

    return masked_attention_stats


def masked_dkdv(dkdv, dt, mask_bool, **hints):
    """The masked dK / dV kernel (B, H_kv, S, D) around the body `dkdv`."""
    mdt = fl.bool_ if mask_bool else dt

    @tile.kernel(**hints)
    def masked_attention_dkdv(
        dk: tile.Part[dt],
        dv: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        dout: tile.Tensor[dt],
        lse: tile.Tensor[fl.f32],
        delta: tile.Tensor[fl.f32],
        m: tile.Tensor[mdt],
        scale: fl.f32,
        TILE_M: tile.Const[int],
        GROUP: tile.Const[int],
    ):
        dkdv(
            dk, dv, q, k, v, dout, lse, delta, None, None, m, scale, None, None, None, TILE_M,
            GROUP,
        )  # fmt: skip

    return masked_attention_dkdv


def masked_dq(dq_rows, dt, mask_bool, **hints):
    """The masked dQ kernel (B, H, L, D) around the body `dq_rows`."""
    mdt = fl.bool_ if mask_bool else dt

    @tile.kernel(**hints)
    def masked_attention_dq(
        dq: tile.Part[dt],
        q: tile.Tensor[dt],
        k: tile.Tensor[dt],
        v: tile.Tensor[dt],
        dout: tile.Tensor[dt],
        lse: tile.Tensor[fl.f32],
        delta: tile.Tensor[fl.f32],
        m: tile.Tensor[mdt],
        scale: fl.f32,
        TILE_N: tile.Const[int],
        GROUP: tile.Const[int],
    ):
        dq_rows(
            dq, q, k, v, dout, lse, delta, None, None, m, scale, None, None, None, TILE_N, GROUP
        )

    return masked_attention_dq
