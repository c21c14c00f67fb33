"""`fearless.ops.gemma_attention_decode` (DESIGN 2c, issue 35): TileGym's Gemma decode (soft cap,
window of the keys j >= S - 1 - window_size) against the float64 reference of
tests/support/gemma_decode_ref.py on the simulator, one split and several, at ragged shapes;
the tiles before the window's are never read; NumPy, fl.Tensor and torch operands, the torch
operator and its fake kernel; the refusals; the new kernels through tileiras."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_attention_gemma import make_gemma_decode_one, make_gemma_decode_split
from support.gemma_decode_ref import gemma_decode_reference as reference

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-5, "float16": 3e-3, "bfloat16": 2e-2}


def _inputs(b, h, hk, s, d, dtype, seed=0):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed * 1000 + s)
    make = lambda *shape: torch.randn(*shape, generator=g).to(getattr(torch, dtype))  # noqa: E731
    return make(b, h, 1, d), make(b, hk, s, d), make(b, hk, s, d)


def _want(q, k, v, scaling, w, cap):  # type: ignore[no-untyped-def]
    return reference(*(x.double().numpy() for x in (q, k, v)), scaling, w, cap)


CASES = [  # ((B, H, H_kv, S, D), dtype, scaling, window_size, soft_cap, kv_len_per_split)
    ((2, 6, 2, 45, 24), "float32", None, 0, None, None),  # GQA 3, D padded: plain
    ((1, 4, 4, 70, 16), "float32", 0.3, 20, 5.0, 16),  # window mid-tile, capped, 4 splits
    ((2, 4, 2, 100, 32), "float16", None, 37, None, 16),  # window only, split
    ((1, 2, 1, 33, 16), "bfloat16", 0.5, 5, 2.0, None),  # both, one split
    ((1, 8, 2, 50, 16), "float32", None, 200, 3.0, 32),  # window wider than S: no mask
    ((1, 2, 2, 1, 16), "float32", None, 4, 1.0, None),  # one key
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, (*c[0], *c[1:]))))
def test_matches_the_reference(case: tuple) -> None:
    (b, h, hk, s, d), dtype, scaling, w, cap, split = case
    q, k, v = _inputs(b, h, hk, s, d, dtype)
    got = ops.gemma_attention_decode(q, k, v, scaling, w, cap, kv_len_per_split=split)
    assert got.dtype == q.dtype and got.shape == q.shape
    want = _want(q, k, v, d**-0.5 if scaling is None else scaling, w, cap)
    err = np.linalg.norm(got.double().numpy() - want) / np.linalg.norm(want)
    assert err < TOL[dtype]


def test_the_cap_and_the_window_change_the_result() -> None:
    """A cap of 1 and a window of 3 keys each move the output away from plain attention."""
    q, k, v = _inputs(1, 2, 1, 40, 16, "float32", seed=1)
    q = q * 4.0  # scores well past the cap
    plain = ops.gemma_attention_decode(q, k, v)
    for w, cap in ((0, 1.0), (3, None)):
        got = ops.gemma_attention_decode(q, k, v, None, w, cap, kv_len_per_split=16)
        assert (got - plain).abs().max() > 0.05
        np.testing.assert_allclose(got.numpy(), _want(q, k, v, 0.25, w, cap), atol=1e-5)


@pytest.mark.parametrize("split", [16, None])
def test_keys_before_the_window_s_tile_are_never_read(split: int | None) -> None:
    """Keys 0..47 (the tiles of 16 before the window's first key 52 = 70 - 1 - 17) hold NaN:
    the blocks start at the window's tile, so the output stays finite and right."""
    q, k, v = _inputs(1, 4, 2, 70, 16, "float32", seed=2)
    want = _want(q, k, v, 0.25, 17, 4.0)
    k[:, :, :48], v[:, :, :48] = math.nan, math.nan
    got = ops.gemma_attention_decode(q, k, v, None, 17, 4.0, kv_len_per_split=split or 16)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_numpy_fl_tensors_torch_ops_and_fake() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    q, k, v = _inputs(1, 4, 2, 30, 16, "float32", seed=3)
    want = _want(q, k, v, 0.2, 6, 3.0)
    arrays = [x.numpy() for x in (q, k, v)]
    got = ops.gemma_attention_decode(*arrays, 0.2, 6, 3.0)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, want, atol=1e-5)
    got = ops.gemma_attention_decode(*(fl.asarray(a) for a in arrays), 0.2, 6, 3.0)
    assert isinstance(got, fl.Tensor)
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5)
    got = torch.ops.fearless.gemma_attention_decode(q, k, v, 0.2, 6, 3.0, 16)
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5)
    with FakeTensorMode():
        fq, fk = torch.empty(2, 8, 1, 16, dtype=torch.bfloat16), torch.empty(2, 2, 9, 16)
        out = torch.ops.fearless.gemma_attention_decode(fq, fk.bfloat16(), fk.bfloat16())
        assert out.shape == fq.shape and out.dtype == torch.bfloat16


def test_refusals_are_fearless_errors() -> None:
    q, k, v = _inputs(1, 4, 2, 6, 16, "float32")
    with pytest.raises(fl.KernelTypeError, match="one query token"):
        ops.gemma_attention_decode(q.expand(1, 4, 2, 16), k, v)
    with pytest.raises(fl.KernelTypeError, match="window_size an int of 0 or more"):
        ops.gemma_attention_decode(q, k, v, window_size=-1)
    for cap in (0.0, -1.0, math.inf):
        with pytest.raises(fl.KernelTypeError, match="soft_cap above 0"):
            ops.gemma_attention_decode(q, k, v, soft_cap=cap)
    for split in (8, 48, True):
        with pytest.raises(fl.KernelTypeError, match="power of two of 16 or more"):
            ops.gemma_attention_decode(q, k, v, kv_len_per_split=split)
    _, k3, v3 = _inputs(1, 3, 3, 6, 16, "float32")  # 4 query heads over 3
    with pytest.raises(fl.KernelTypeError, match="H a multiple of H_kv"):
        ops.gemma_attention_decode(q, k3, v3)
    with pytest.raises(fl.KernelTypeError, match="dtypes"):
        ops.gemma_attention_decode(q, k.half(), v.half())
    with pytest.raises(fl.KernelTypeError, match="has no backward yet"):
        ops.gemma_attention_decode(q.requires_grad_(), k, v)
    with torch.no_grad():
        assert ops.gemma_attention_decode(q, k[:, :, :0], v[:, :, :0]).abs().max() == 0


@pytest.mark.parametrize("flags", [(True, True), (True, False), (False, True)], ids=str)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_the_gemma_decode_kernels_compile_through_tileiras(
    cubin: Callable[..., bytes], flags: tuple, dtype: str
) -> None:
    """At Gemma 3's decode sizes: 8 query heads over 4 KV heads (QG 8), D 256, 4096 keys."""
    dt = getattr(fl, dtype)
    q = fl.zeros((1, 4, 2, 256), dtype=dt)
    kv = fl.zeros((1, 4, 4096, 256), dtype=dt)
    out = fl.empty(q.shape, dtype=dt).partition((1, 1, 8, 256))
    one = make_gemma_decode_one(dt, *flags, occupancy=2)
    assert cubin(one, out, q, kv, kv, 0.0025, 72.1, 3583, 128)
    part_o = fl.empty((1, 4, 4, 2, 256), dtype=fl.f32).partition((1, 1, 1, 8, 256))
    part_l = fl.empty((1, 4, 4, 2, 1), dtype=fl.f32).partition((1, 1, 1, 8, 1))
    split = make_gemma_decode_split(dt, *flags, occupancy=2)
    assert cubin(split, part_o, part_l, q, kv, kv, 0.0025, 72.1, 3583, 64, 2)
