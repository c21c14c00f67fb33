"""The split-KV decode form of `fearless.ops.flash_attn_with_kvcache` (one new query,
ops/kernels_kvcache_decode.py) on the simulator: every tuner configuration (one split, several,
and splits with no key to walk) against the float64 reference, contiguous and paged, with
windows, soft caps, GQA groups and lengths of 0; a bad block id or length is recorded and
reads nothing outside the cache nor another block; the kernels through tileiras."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops import kernels_attention_decode as KAD
from fearless.ops._device_checks import NO_ERROR
from fearless.ops.kernels_attention_decode import decode_cfg, make_decode_combine
from fearless.ops.kernels_kvcache import table_tile
from fearless.ops.kernels_kvcache_decode import (
    KVCACHE_DECODE_CONFIGS,
    kvcache_decode_tuned,
    make_kvcache_decode_one,
    make_kvcache_decode_split,
)
from support.kvcache_ref import kvcache_reference as reference
from support.kvcache_ref import paged


def _inputs(b: int, s: int, h: int, hk: int, d: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32)
            for shape in ((b, 1, h, d), (b, s, hk, d), (b, s, hk, d))]  # fmt: skip


def _decode(q: np.ndarray, k: np.ndarray, v: np.ndarray, lens: Any, table: Any, cfg: dict,
            sm: int, left: int = -1, cap: float = 0.0, scale: float = 0.25) -> np.ndarray:  # fmt: skip
    """The tuned launch's body at one configuration (no tuning), on `sm` SMs' worth of
    splits; returns the output and checks the error words stayed clean."""
    b, _, h, d = q.shape
    hk = k.shape[2]
    out = fl.empty((b, hk, h // hk, d), dtype=fl.f32)
    err = fl.asarray(np.full(2, NO_ERROR, np.int32))
    tt = None if table is None else fl.asarray(table)
    kvcache_decode_tuned.fn(
        fl.asarray(q.reshape(b, hk, h // hk, d)), fl.asarray(k), fl.asarray(v),
        fl.asarray(np.asarray(lens, np.int32)), tt, err, out, scale, (left >= 0, cap > 0.0),
        max(left, 0), cap or 1.0, sm, **cfg,
    )  # fmt: skip
    assert (err.numpy() == NO_ERROR).all()
    return out.numpy().reshape(b, 1, h, d)


CASES = [  # (B, S, H, H_kv, D), seqlens, left window, soft cap
    ((3, 70, 4, 2, 16), [70, 0, 33], -1, 0.0),
    ((2, 96, 8, 1, 32), [96, 5], -1, 0.0),  # MQA: a group of 8
    ((2, 80, 12, 4, 16), [80, 41], 7, 0.0),  # a group of 3, padded to 8; a window
    ((2, 64, 4, 4, 40), [64, 1], -1, 5.0),  # no grouping, D 40, a soft cap
]


# the shipped configurations, and tiles of 16 keys: several splits over these short caches
@pytest.mark.parametrize("cfg", [*KVCACHE_DECODE_CONFIGS, decode_cfg(16, 2, 1)], ids=str)
@pytest.mark.parametrize("page", [None, 16])
def test_every_configuration_matches_the_reference(
    cfg: dict, page: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    splits: list[tuple[int, ...]] = []
    launch = KAD.split_combine_launch

    def counted(out: Any, part_shape: tuple[int, ...], *args: Any) -> None:
        splits.append(part_shape)
        launch(out, part_shape, *args)

    monkeypatch.setattr(KAD, "split_combine_launch", counted)
    for (b, s, h, hk, d), lens, left, cap in CASES:
        q, k, v = _inputs(b, s, h, hk, d)
        want = reference(q, k, v, np.array(lens), 0.25, False, (left, -1), cap)
        table = None
        if page is not None:
            k, v, table = paged(k, v, page, np.random.default_rng(1))
        for sm in (1, 64):  # one split; splits of one tile, most of them past the length
            got = _decode(q, k, v, lens, table, cfg, sm, left, cap)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert splits or cfg["tile_n"] > 16 or cfg["waves"] == 0  # the split kernels ran


def test_the_operator_takes_the_decode_at_one_query(monkeypatch: pytest.MonkeyPatch) -> None:
    """flash_attn_with_kvcache at L = 1 launches the decode kernels, never the general one
    (causal and a right window change nothing for the last position), and agrees with the
    reference."""
    from fearless.ops import kvcache_attention

    def general(*_: Any, **__: Any) -> None:
        raise AssertionError("the general kernel ran for one query")

    monkeypatch.setattr(kvcache_attention, "kvcache_attention_tuned", general)
    q, k, v = _inputs(2, 48, 8, 2, 16, seed=3)
    lens = np.array([48, 17], np.int32)
    for causal, window in ((False, (-1, -1)), (True, (5, -1)), (False, (4, 9))):
        got = ops.flash_attn_with_kvcache(q, k, v, lens, causal=causal, window_size=window)
        want = reference(q, k, v, lens, None, causal, window, 0.0)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_bad_block_or_length_is_recorded_and_reads_nothing_outside() -> None:
    """Sequence 1's slot 3 is outside the cache and block 0, which the clamp reads, is NaN: the
    error word names (1, 3) and the output is that of the sequence without the bad page; a
    length past the capacity is recorded too, and the operator raises both."""
    q, k, v = _inputs(4, 32, 2, 1, 16, seed=4)
    kb, vb, table = paged(k, v, 4, np.random.default_rng(2), spare=0)  # 32 blocks, 8 slots
    kb[0] = vb[0] = np.nan
    t = np.where(table == 0, 31, table)  # no sequence uses block 0 ...
    t[1, 3] = 5000  # ... and sequence 1's slot 3 (keys 12..15) is outside the cache
    lens = np.array([32, 32, 32, 32], np.int32)
    for make in (make_kvcache_decode_one, make_kvcache_decode_split):
        out = fl.empty((4, 1, 2, 16), dtype=fl.f32)
        err = fl.asarray(np.full(2, NO_ERROR, np.int32))
        kernel = make(fl.f32, True, False, False)
        args: list[Any] = [fl.asarray(x) for x in (q.reshape(4, 1, 2, 16), kb, vb, lens, t)]
        args += [err, 0.25, 0, 1.0, 4, 4, table_tile(8)]
        if make is make_kvcache_decode_one:
            with out.partition((1, 1, 8, 16)) as part:
                kernel(part, *args)
        else:  # four splits of two tiles, then the combine
            o, lse = fl.empty((4, 1, 4, 2, 16)), fl.empty((4, 1, 4, 2, 1))
            with o.partition((1, 1, 1, 8, 16)) as po, lse.partition((1, 1, 1, 8, 1)) as pl:
                kernel(po, pl, *args, 2)
            with out.partition((1, 1, 8, 16)) as part:
                make_decode_combine(fl.f32, True)(part, o, lse, 4)
        assert err.numpy()[0] == 1 * 8 + 3 and err.numpy()[1] == NO_ERROR
        got = out.numpy().reshape(4, 1, 2, 16)
        assert np.isfinite(got).all()
        keep = np.r_[0:12, 16:32]  # sequence 1 without its bad page
        want = reference(q[1:2], k[1:2, keep], v[1:2, keep], [28], 0.25)
        np.testing.assert_allclose(got[1:2], want, rtol=1e-5, atol=1e-5)
    with pytest.raises(fl.KernelIndexError, match=r"block_table\[1, 3\] = 5000"):
        ops.flash_attn_with_kvcache(q, kb, vb, lens, np.where(t == 5000, 5000, t))
    with pytest.raises(fl.KernelIndexError, match=r"cache_seqlens\[2\] = 40 is outside"):
        ops.flash_attn_with_kvcache(q, k, v, np.array([1, 2, 40, 3], np.int32))


@pytest.mark.parametrize("page", [None, 256])
def test_the_decode_kernels_compile_through_tileiras(
    cubin: Callable[..., bytes], page: int | None
) -> None:
    dt = fl.bf16
    q = fl.zeros((8, 8, 4, 128), dtype=dt)
    lens, err = fl.zeros((8,), dtype=fl.i32), fl.zeros((2,), dtype=fl.i32)
    if page is None:
        kv, table, tn, mbp, pg = fl.zeros((8, 4096, 8, 128), dtype=dt), None, 128, 1, 1
    else:
        kv = fl.zeros((128, page, 8, 128), dtype=dt)
        table, tn, mbp, pg = fl.zeros((8, 16), dtype=fl.i32), 128, table_tile(16), page
    paged_ = page is not None
    one = make_kvcache_decode_one(dt, paged_, True, True, occupancy=2)
    out = fl.empty(q.shape, dtype=dt).partition((1, 1, 8, 128))
    assert cubin(one, out, q, kv, kv, lens, table, err, 0.1, 127, 30.0, tn, pg, mbp)
    split = make_kvcache_decode_split(dt, paged_, False, False, occupancy=2)
    po = fl.empty((8, 8, 4, 4, 128)).partition((1, 1, 1, 8, 128))
    pl = fl.empty((8, 8, 4, 4, 1)).partition((1, 1, 1, 8, 1))
    assert cubin(split, po, pl, q, kv, kv, lens, table, err, 0.1, 0, 1.0, tn, pg, mbp, 8)
    combine = make_decode_combine(dt, True)
    assert cubin(combine, out, fl.zeros((8, 8, 4, 4, 128)), fl.zeros((8, 8, 4, 4, 1)), 4)
