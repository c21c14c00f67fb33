"""`fearless.ops.sparse_mla` (DESIGN 2c, issue 35): TileGym's sparse MLA prefill (each query
attends to the top-k keys its row of indices names) against the float64 reference of
tests/support/sparse_mla_ref.py on the simulator: GQA and several head tiles, ragged topk,
causal and not, f32/f16/bf16; an index outside the cache is a KernelIndexError and is never
read; NumPy, the torch operator and its fake kernel; the refusals; the kernel through tileiras."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_attention_mla_sparse import make_sparse_mla
from support.sparse_mla_ref import sparse_mla_reference as reference

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-5, "float16": 3e-3, "bfloat16": 2e-2}


def _inputs(b, h, hk, s, s_kv, d, dp, topk, dtype, seed=0):  # type: ignore[no-untyped-def]
    """q, k, v, indices, qpe, kpe: indices as TileGym's test makes them (the causal past first,
    future fillers where s + 1 < topk, shuffled)."""
    g = torch.Generator().manual_seed(seed)
    make = lambda *sh: (torch.randn(*sh, generator=g) * 0.5).to(getattr(torch, dtype))  # noqa: E731
    idx = torch.empty(b, s, hk, topk, dtype=torch.int32)
    for bb, ss, gg in np.ndindex(b, s, hk):
        past = torch.randperm(ss + 1, generator=g)[:topk]
        future = torch.randperm(s_kv - ss - 1, generator=g)[: topk - len(past)] + ss + 1
        row = torch.cat([past, future])
        idx[bb, ss, gg] = row[torch.randperm(topk, generator=g)]
    return (
        make(b, h, s, d),
        make(b, hk, s_kv, d),
        make(b, hk, s_kv, d),
        idx,
        make(b, h, s, dp),
        make(b, 1, s_kv, dp),
    )


def _want(args, causal=True, scaling=None):  # type: ignore[no-untyped-def]
    return reference(
        *(x.numpy() if x.dtype == torch.int32 else x.double().numpy() for x in args),
        causal,
        scaling,
    )


CASES = [  # ((B, H, H_kv, S, S_kv, D, D_PE, topk), dtype, causal, scaling)
    ((1, 4, 1, 9, 20, 16, 8, 10), "float32", True, None),  # topk ragged, rows with fillers
    ((2, 6, 2, 5, 33, 24, 8, 20), "float32", False, 0.3),  # GQA 3, D padded, not causal
    ((1, 20, 1, 4, 40, 16, 16, 16), "bfloat16", True, None),  # G 20: two head tiles of 16
    ((1, 2, 2, 6, 70, 32, 8, 40), "float16", True, 0.2),  # 1:1 heads, two key tiles
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, (*c[0], *c[1:]))))
def test_matches_the_reference(case: tuple) -> None:
    shape, dtype, causal, scaling = case
    args = _inputs(*shape, dtype)
    got = ops.sparse_mla(*args, is_causal=causal, scaling=scaling)
    assert got.dtype == args[0].dtype and got.shape == args[0].shape
    want = _want(args, causal, scaling)
    err = np.linalg.norm(got.double().numpy() - want) / np.linalg.norm(want)
    assert err < TOL[dtype]


def test_only_the_named_keys_count() -> None:
    """Keys no index names hold NaN: the result stays finite and right; topk == S_kv with every
    key named is dense causal MLA."""
    q, k, v, idx, qpe, kpe = _inputs(1, 4, 1, 6, 30, 16, 8, 8, "float32", seed=1)
    named = torch.zeros(30, dtype=torch.bool)
    named[idx.flatten().long()] = True
    want = _want((q, k, v, idx, qpe, kpe))
    for x in (k, v, kpe):
        x[:, :, ~named] = math.nan
    np.testing.assert_allclose(ops.sparse_mla(q, k, v, idx, qpe, kpe).numpy(), want, atol=1e-5)
    q, k, v, _, qpe, kpe = _inputs(1, 4, 1, 12, 12, 16, 8, 12, "float32", seed=2)
    every = torch.arange(12, dtype=torch.int32).expand(1, 12, 1, 12).contiguous()
    got = ops.sparse_mla(q, k, v, every, qpe, kpe)
    dense = ops.mla(q, k, v, qpe, kpe, True)
    np.testing.assert_allclose(got.numpy(), dense.numpy(), atol=1e-5)


@pytest.mark.parametrize("bad", [30, -1, 2**31 - 1])
def test_an_index_outside_the_cache_is_an_error_and_never_read(bad: int) -> None:
    args = list(_inputs(1, 4, 2, 5, 30, 16, 8, 8, "float32", seed=3))
    args[3][0, 2, 1, 5] = bad
    with pytest.raises(
        fl.KernelIndexError, match=rf"indices\[0, 2, 1, 5\] = {bad} is outside the cache's 30 keys"
    ):
        ops.sparse_mla(*args)


def test_numpy_torch_ops_and_fake() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    args = _inputs(1, 4, 2, 5, 17, 16, 8, 6, "float32", seed=4)
    want = _want(args, False, 0.3)
    got = ops.sparse_mla(*(x.numpy() for x in args), False, 0.3)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, want, atol=1e-5)
    got = torch.ops.fearless.sparse_mla(*args, False, 0.3)
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5)
    with FakeTensorMode():
        fake = [torch.empty(x.shape, dtype=x.dtype) for x in args]
        out = torch.ops.fearless.sparse_mla(*fake)
        assert out.shape == args[0].shape and out.dtype == args[0].dtype


def test_refusals_are_fearless_errors() -> None:
    q, k, v, idx, qpe, kpe = _inputs(1, 4, 2, 5, 17, 16, 8, 6, "float32")
    with pytest.raises(fl.KernelTypeError, match="takes i32 tensors"):
        ops.sparse_mla(q, k, v, idx.long(), qpe, kpe)
    with pytest.raises(fl.KernelTypeError, match="one float dtype"):
        ops.sparse_mla(q, k.half(), v.half(), idx, qpe, kpe)
    with pytest.raises(fl.KernelTypeError, match="H a multiple of H_kv"):
        ops.sparse_mla(q[:, :3], k, v, idx, qpe[:, :3], kpe)
    with pytest.raises(fl.KernelTypeError, match="kpe"):
        ops.sparse_mla(q, k, v, idx, qpe, kpe.expand(1, 2, 17, 8))
    with pytest.raises(fl.KernelTypeError, match="indices"):
        ops.sparse_mla(q, k, v, idx[:, :4], qpe, kpe)
    with pytest.raises(fl.KernelTypeError, match="has no backward yet"):
        ops.sparse_mla(q.requires_grad_(), k, v, idx, qpe, kpe)


@pytest.mark.parametrize(
    ("dtype", "causal"),
    [
        ("bf16", True),
        # the other forms at DeepSeek-V3.2's size take 5-7 s each: `make test-slow`
        pytest.param("bf16", False, marks=pytest.mark.slow),
        pytest.param("f16", True, marks=pytest.mark.slow),
        pytest.param("f16", False, marks=pytest.mark.slow),
    ],
)
def test_the_kernel_compiles_through_tileiras(
    cubin: Callable[..., bytes], causal: bool, dtype: str
) -> None:
    """At DeepSeek-V3.2's sizes: 16 heads over one latent head, D 512, D_PE 64, topk 2048."""
    dt = getattr(fl, dtype)
    q, qpe = fl.zeros((1, 1, 16, 64, 512), dtype=dt), fl.zeros((1, 1, 16, 64, 64), dtype=dt)
    kv, kpe = fl.zeros((1, 1, 4096, 512), dtype=dt), fl.zeros((1, 1, 4096, 64), dtype=dt)
    idx, err = fl.zeros((1, 64, 1, 2048), dtype=fl.i32), fl.zeros((1,), dtype=fl.i32)
    out = fl.empty(q.shape, dtype=dt).partition((1, 1, 16, 1, 512))
    kernel = make_sparse_mla(dt, causal, occupancy=1)
    assert cubin(kernel, out, q, qpe, kv, kv, kpe, idx, err, 0.04, 64, 64)
