"""`fearless.ops.sparse_mla` on the GPU at TileGym's test shapes
(tests/ops/experimental/test_sparse_mla.py: bf16, D 128, D_PE 64, 16 to 64 query heads over 1,
4 or 8 KV heads, S 1 to 128, S_kv 64 to 256, topk 64 to 256, causal) against the float64
reference of tests/support/sparse_mla_ref.py, with TileGym's tolerances; and an index outside
the cache raised at `fl.synchronize()`."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from support.sparse_mla_ref import sparse_mla_reference

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

CASES = [  # (B, H, S, S_kv, D, D_PE, H_kv, topk): TileGym's test_op_* cases
    (1, 16, 64, 128, 128, 64, 1, 64),
    (2, 32, 128, 256, 128, 64, 1, 128),
    (1, 64, 128, 256, 128, 64, 1, 256),
    (1, 16, 64, 128, 128, 64, 4, 64),
    (1, 32, 64, 128, 128, 64, 8, 64),
    (1, 16, 33, 77, 128, 64, 1, 64),
    (1, 16, 1, 128, 128, 64, 1, 64),
    (1, 24, 64, 128, 128, 64, 8, 64),  # group 3
]


def _indices(b: int, s: int, hk: int, topk: int, s_kv: int) -> object:
    idx = torch.empty(b, s, hk, topk, dtype=torch.int32)
    for bb, ss, g in np.ndindex(b, s, hk):
        past = torch.randperm(ss + 1)[:topk]
        future = torch.randperm(s_kv - ss - 1)[: topk - len(past)] + ss + 1
        row = torch.cat([past, future])
        idx[bb, ss, g] = row[torch.randperm(topk)]
    return idx.cuda()


def _data(b, h, s, s_kv, d, dp, hk, topk):  # type: ignore[no-untyped-def]
    def data(*shape: int) -> object:
        return torch.empty(*shape, device="cuda").normal_(0.0, 0.3).to(torch.bfloat16)

    q, k, v = data(b, h, s, d), data(b, hk, s_kv, d), data(b, hk, s_kv, d)
    qpe, kpe = data(b, h, s, dp), data(b, 1, s_kv, dp)
    return q, k, v, _indices(b, s, hk, topk, s_kv), qpe, kpe


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_matches_the_reference(case: tuple) -> None:
    torch.manual_seed(0)
    args = _data(*case)
    got = ops.sparse_mla(*args, is_causal=True)
    assert got.is_cuda and got.shape == args[0].shape and got.dtype == torch.bfloat16
    host = [x.cpu().numpy() if x.dtype == torch.int32 else x.double().cpu().numpy() for x in args]
    want = sparse_mla_reference(*host, True)
    np.testing.assert_allclose(got.double().cpu().numpy(), want, atol=1e-2, rtol=1e-2)


def test_an_index_outside_the_cache_is_raised_at_synchronize() -> None:
    # the launches since the last synchronisation share the error words (ops/_device_checks.py):
    # start clean, so that this launch is their only one and its value is named
    fl.synchronize()
    args = list(_data(1, 16, 8, 128, 128, 64, 1, 64))
    args[3][0, 3, 0, 7] = 128
    ops.sparse_mla(*args)
    with pytest.raises(fl.KernelIndexError, match=r"indices\[0, 3, 0, 7\] = 128"):
        fl.synchronize()


def test_replayed_calls_are_checked_and_match_the_slow_path() -> None:
    """From the second or third call with a key the operator replays (ops/_replay.py): the same
    output as its slow path, and a bad index in a replayed call still raised at the next
    synchronisation, at that call's line."""
    import inspect

    torch.manual_seed(1)
    fl.synchronize()
    args = list(_data(1, 16, 8, 128, 128, 64, 1, 64))
    for _ in range(3):
        ops.sparse_mla(*args)
    fl.synchronize()
    assert any(type(p).__name__ == "Plan" for p in ops.sparse_mla.plans.values())  # type: ignore[attr-defined]
    fresh = list(_data(1, 16, 8, 128, 128, 64, 1, 64))
    got = ops.sparse_mla(*fresh)
    want = ops.sparse_mla.__wrapped__(*fresh)  # type: ignore[attr-defined]
    fl.synchronize()
    assert torch.equal(got, want)
    fresh[3][0, 5, 0, 2] = -3
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    ops.sparse_mla(*fresh)  # replayed
    with pytest.raises(fl.KernelIndexError, match=r"indices\[0, 5, 0, 2\] = -3") as info:
        fl.synchronize()
    assert info.value.loc is not None and info.value.loc.line == line


def test_a_configuration_that_would_hang_is_refused_before_it_launches() -> None:
    """At occupancy 2 tileiras 13.5 compiles this kernel to a cubin whose consumer warp group
    can never get the registers it asks for (it hung the H100, 2026-12-05): the first launch
    raises E0700 instead, and the GPU is still usable after it."""
    from fearless.ops.kernels_attention_mla_sparse import make_sparse_mla

    b, g, s, s_kv, d, dp, topk = 1, 16, 64, 128, 128, 64, 64
    q, qpe = fl.zeros((b, 1, g, s, d), dtype=fl.bf16), fl.zeros((b, 1, g, s, dp), dtype=fl.bf16)
    kv, kpe = fl.zeros((b, 1, s_kv, d), dtype=fl.bf16), fl.zeros((b, 1, s_kv, dp), dtype=fl.bf16)
    indices, err = fl.zeros((b, s, 1, topk), dtype=fl.i32), fl.zeros((1,), dtype=fl.i32)
    out = fl.empty(q.shape, dtype=fl.bf16).partition((1, 1, g, 1, d))
    kernel = make_sparse_mla(fl.bf16, True).options(occupancy=2)
    with pytest.raises(fl.LaunchContractError, match="would hang the GPU"):
        kernel(out, q, qpe, kv, kv, kpe, indices, err, 0.07, 64, 64)
    out.unpartition()
    x = fl.asarray(np.arange(8, dtype=np.float32))
    assert (ops.relu(x).numpy() == np.arange(8)).all()  # the context is fine
