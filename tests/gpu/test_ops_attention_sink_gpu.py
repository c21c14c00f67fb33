"""`fearless.ops.attention_sink` and `attention_sink_decode` on the GPU at TileGym's test shapes
(tests/ops/test_attention_sink.py: bf16, 8 KV heads of 8 query heads, D 64, start_q 0 and 5,
no window and 128), against the float64 reference of tests/support/attention_sink_ref.py, with
TileGym's tolerances; the split-KV decode at GPT-OSS's decode shapes (64 query heads on 8 KV
heads, D 64, contexts of 4k to 32k, a window of 128 on alternate layers), tuned and with
kv_len_per_split pinned to one split, to many and to one key tile per split."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from fearless import ops
from support.attention_sink_ref import attention_sink_reference as reference

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _data(*shape: int) -> object:
    return torch.randn(*shape, device="cuda").to(torch.bfloat16)


def _check(got: object, want: np.ndarray) -> None:
    np.testing.assert_allclose(got.float().cpu().numpy(), want, atol=5e-2, rtol=1e-2)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "b,lq,s,w,start",
    [
        (b, lq, s, w, start)
        for b, lq, s, w, start in itertools.product(
            (1, 2), (1, 128), (128, 32), (None, 128), (0, 5)
        )
        if lq <= s
    ],
)
def test_attention_sink_matches_the_reference(
    b: int, lq: int, s: int, w: object, start: int
) -> None:
    torch.manual_seed(0)
    q, k, v, sinks = _data(b, lq, 8, 8, 64), _data(b, s, 8, 64), _data(b, s, 8, 64), _data(64)
    st = torch.tensor([start], dtype=torch.int32, device="cuda")
    got = ops.attention_sink(q, k, v, sinks, 0.125, w, st)
    assert got.is_cuda and got.shape == (b, lq, 8 * 8 * 64)
    args = [x.float().cpu().numpy() for x in (q, k, v, sinks)]
    _check(got, reference(*args, 0.125, w, start))


@pytest.mark.parametrize("s,w", [(2048, None), (2048, 128), (10919, None)])
def test_attention_sink_decode_matches_the_reference(s: int, w: object) -> None:
    torch.manual_seed(1)
    q, k, v, sinks = _data(1, 1, 8, 8, 64), _data(1, s, 8, 64), _data(1, s, 8, 64), _data(64)
    st = torch.tensor([s - 1], dtype=torch.int32, device="cuda")
    args = [x.float().cpu().numpy() for x in (q, k, v, sinks)]
    _check(
        ops.attention_sink_decode(q, k, v, sinks, 0.125, w, st), reference(*args, 0.125, w, s - 1)
    )
    _check(
        ops.attention_sink_decode(q, k, v, None, 0.125, w, st),
        reference(*args[:3], None, 0.125, w, s - 1),
    )


def test_attention_sink_long_prefill_with_a_window() -> None:
    torch.manual_seed(2)
    q, k, v, sinks = (
        _data(1, 2048, 8, 8, 64),
        _data(1, 2048, 8, 64),
        _data(1, 2048, 8, 64),
        _data(64),
    )
    args = [x.float().cpu().numpy() for x in (q, k, v, sinks)]
    _check(ops.attention_sink(q, k, v, sinks, 0.125, 128, 0), reference(*args, 0.125, 128, 0))


GPT_OSS_DECODE = [  # (B, S, window, start_q): the query at start_q of a cache of S keys
    (b, s, w, s - 1) for b, s in ((1, 4096), (1, 16384), (1, 32768), (4, 8192)) for w in (None, 128)
] + [(1, 32768, None, 5000), (1, 32768, 128, 20000)]  # a cache longer than the context


@pytest.mark.parametrize("b,s,w,start", GPT_OSS_DECODE)
@pytest.mark.parametrize("split", [None, 128, 2048, 32768])
def test_split_kv_decode_at_gpt_oss_shapes(
    b: int, s: int, w: int | None, start: int, split: int | None
) -> None:
    """kv_len_per_split None (the tuner: split or not), 128 (a split per key tile: hundreds of
    splits, or two under a window), 2048 and 32768 (one split: the one-split kernel)."""
    torch.manual_seed(3)
    q, k, v = _data(b, 1, 8, 8, 64), _data(b, s, 8, 64), _data(b, s, 8, 64)
    sinks = _data(64)
    st = torch.tensor([start], dtype=torch.int32, device="cuda")
    got: Any = ops.attention_sink_decode(q, k, v, sinks, 0.125, w, st, split)
    assert got.is_cuda and got.shape == (b, 1, 64 * 64)
    args = [x.float().cpu().numpy() for x in (q, k, v, sinks)]  # type: ignore[attr-defined]
    want = reference(*args, 0.125, w, start)
    _check(got, want)
    err = np.linalg.norm(got.float().cpu().numpy() - want) / np.linalg.norm(want)
    assert err < 1e-2
    if split is None:  # no sinks: plain attention, through the same splits
        got = ops.attention_sink_decode(q, k, v, None, 0.125, w, st)
        _check(got, reference(*args[:3], None, 0.125, w, start))
