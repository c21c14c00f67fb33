"""`fearless.ops.attention_sink_decode`'s split-KV form (ops/kernels_attention_sink_decode.py)
on the simulator, against the float64 reference of tests/support/attention_sink_ref.py and the
one-split form: several split counts (splits past the last key the query sees, which store
nothing but lse -inf), a window that leaves splits out, ragged lengths, GQA with G not a power
of two, D not a power of two, no key at all, no sinks, kv_len_per_split pinned; the split
kernels through tileiras."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_attention_sink_decode import (
    make_sink_decode_combine,
    make_sink_decode_split,
    sink_decode_launch,
    sink_reach,
)
from support.attention_sink_ref import attention_sink_reference as reference

torch = pytest.importorskip("torch")


def _inputs(b, s, hk, g, d, seed=0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed + 31 * s + g)
    q = rng.standard_normal((b, 1, hk, g, d)).astype(np.float32)
    k, v = (rng.standard_normal((b, s, hk, d)).astype(np.float32) for _ in "kv")
    return q, k, v, (rng.standard_normal(hk * g) * 2).astype(np.float32)


def _launch(q, k, v, sinks, start, scale, w, tile_n, splits, split_tiles):  # type: ignore[no-untyped-def]
    """The decode's launches with this split, on fl.Tensors; returns (B, 1, H * D)."""
    b, _, hk, g, d = q.shape
    out = fl.empty((b, hk, g, d), dtype=fl.f32)
    sk = np.full(hk * g, -np.inf, np.float32) if sinks is None else sinks
    sink_decode_launch(
        fl.asarray(q.reshape(b, hk, g, d)),
        fl.asarray(k),
        fl.asarray(v),
        fl.asarray(sk.reshape(hk, g)),
        fl.asarray(np.array([start], np.int32)),
        out,
        scale,
        None if not w else w - 1,
        tile_n,
        2,
        splits,
        split_tiles,
    )
    return out.numpy().reshape(b, 1, hk * g * d)


SPLIT_CASES = [  # ((B, S, H_kv, G, D), window, start)
    ((2, 100, 2, 3, 16), None, 99),  # GQA of 3 heads (QG 8), ragged S: 7 tiles of 16
    ((1, 100, 2, 2, 16), None, 40),  # start inside the cache: the splits past key 40 get none
    ((1, 90, 1, 4, 24), 20, 70),  # a window of 20: from key 51's tile on, D not a power of two
    ((2, 64, 2, 1, 16), 16, 63),  # a window on a tile boundary: keys 48..63 in one tile
    ((1, 70, 2, 2, 16), 5, 3),  # a window wider than what precedes the query
]


@pytest.mark.parametrize("case", SPLIT_CASES, ids=lambda c: "-".join(map(str, (*c[0], *c[1:]))))
def test_split_forms_match_the_one_split_form_and_the_reference(case: tuple) -> None:
    """Split tiles of 1, 2 and 3 key tiles of 16, with as many splits as the keys' reach needs
    and 3 more (splits that get no key), each equal to the one-split kernel."""
    (b, s, hk, g, d), w, start = case
    q, k, v, sinks = _inputs(b, s, hk, g, d)
    want = reference(q, k, v, sinks, 0.3, w, start)
    one = _launch(q, k, v, sinks, start, 0.3, w, 16, 1, 1)
    np.testing.assert_allclose(one, want, rtol=1e-5, atol=1e-5)
    reach = sink_reach(s, None if not w else w - 1, 16)
    for split_tiles in (1, 2, 3):
        splits = -(-reach // (16 * split_tiles)) + 3
        got = _launch(q, k, v, sinks, start, 0.3, w, 16, splits, split_tiles)
        np.testing.assert_allclose(got, one, rtol=2e-6, atol=2e-6, err_msg=f"{split_tiles=}")


def test_no_key_and_no_sinks_in_the_split_form() -> None:
    """A query before key 0, or past the keys by more than its window, gives 0 in every form
    (no sink, or all the weight on it); without sinks the split form is plain attention."""
    q, k, v, sinks = _inputs(1, 50, 2, 2, 16)
    for start, w in ((-3, None), (80, 10)):
        for splits in (1, 4):
            got = _launch(q, k, v, sinks, start, 0.125, w, 16, splits, 1)
            assert np.array_equal(got, np.zeros_like(got))
            got = _launch(q, k, v, None, start, 0.125, w, 16, splits, 1)
            assert np.array_equal(got, np.zeros_like(got))
    want = reference(q, k, v, None, 0.125, None, 49)
    got = _launch(q, k, v, None, 49, 0.125, None, 16, 5, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    big = sinks.copy()
    big[0] = 40.0  # head 0's sink takes almost all its weight, once (not once per split)
    got = _launch(q, k, v, big, 49, 0.125, None, 16, 4, 1)
    np.testing.assert_allclose(got, reference(q, k, v, big, 0.125, None, 49), atol=1e-6)
    assert np.abs(got[0, 0, :16]).max() < 1e-6


def test_the_op_with_kv_len_per_split_pinned_and_tuned() -> None:
    """The public op, torch in and out: kv_len_per_split of 1 (taken as 16), 16, 32 and 1024,
    and None (the tuner; the simulator takes its first configuration, split over its 4 SMs),
    bf16 with f32 sinks and a tensor start_q."""
    q, k, v, sinks = (torch.from_numpy(x) for x in _inputs(1, 150, 2, 4, 32))
    qh, kh, vh = (x.bfloat16() for x in (q, k, v))
    st = torch.tensor([140], dtype=torch.int32)
    for w in (None, 24):
        want = reference(*(x.float().numpy() for x in (qh, kh, vh, sinks)), 0.125, w, 140)
        for split in (1, 16, 32, 1024, None):
            got = ops.attention_sink_decode(qh, kh, vh, sinks, 0.125, w, st, split)
            assert got.dtype == torch.bfloat16 and got.shape == (1, 1, 256)
            err = np.linalg.norm(got.float().numpy() - want) / np.linalg.norm(want)
            assert err < 1e-2, (w, split)


def _split_args(dt: object) -> tuple:
    q = fl.zeros((1, 8, 8, 64), dtype=dt)
    kv = fl.zeros((1, 4096, 8, 64), dtype=dt)
    part_o = fl.empty((1, 8, 16, 8, 64), dtype=fl.f32).partition((1, 1, 1, 8, 64))
    part_l = fl.empty((1, 8, 16, 8, 1), dtype=fl.f32).partition((1, 1, 1, 8, 1))
    start = fl.zeros((1,), dtype=fl.i32)
    return part_o, part_l, q, kv, kv, start, 0.125, 127, 128, 2


def test_the_split_kernel_compiles_through_tileiras(cubin: Callable[..., bytes]) -> None:
    """GPT-OSS's decode shape: 8 KV heads of 8 query heads, D 64, bf16, windowed."""
    assert cubin(make_sink_decode_split(fl.bf16, True, occupancy=2), *_split_args(fl.bf16))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_the_other_decode_kernels_compile_through_tileiras(
    cubin: Callable[..., bytes], dtype: str
) -> None:
    from fearless.ops.kernels_attention_sink_decode import make_sink_decode_one

    dt = getattr(fl, dtype)
    _, _, q, kv, _, start, *_ = _split_args(dt)
    assert cubin(make_sink_decode_split(dt, False), *_split_args(dt))
    out = fl.empty((1, 8, 8, 64), dtype=dt).partition((1, 1, 8, 64))
    sinks = fl.zeros((8, 8), dtype=fl.bf16)
    one = make_sink_decode_one(dt, fl.bf16, True, occupancy=2)
    assert cubin(one, out, q, kv, kv, sinks, start, 0.125, 127, 128)
    o = fl.empty((1, 8, 16, 8, 64), dtype=fl.f32)
    lse = fl.empty((1, 8, 16, 8, 1), dtype=fl.f32)
    assert cubin(make_sink_decode_combine(dt, fl.bf16), out, o, lse, sinks, 8)
