"""`fearless.ops.fused_moe` and `moe_align_block_size` on the GPU at TileGym's shapes
(tests/ops/test_moe.py: tokens 16 / 32 / 64, hidden 512 / 1024, intermediate 256 / 512,
experts 8 / 16 / 20, top_k 2 / 4 / 8, bf16, ids from randint so rows may repeat an expert)
against its torch reference restated (float32 here), with TileGym's tolerances; its backward
(through torch autograd) at those shapes against autograd of the float64 reference
(tests/support/moe_ref.py); and the alignment against the NumPy reference, exactly."""

from __future__ import annotations

import numpy as np
import pytest

from fearless import ops
from support.moe_ref import moe_align_reference, moe_backward_case, moe_inputs

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _reference(x, w1, w2, weights, ids):  # type: ignore[no-untyped-def]
    """TileGym's per-token reference, batched over the (token, k) slots, in f32."""
    inter = w1.shape[1] // 2
    e = ids.reshape(-1)
    xs = x.float().repeat_interleave(ids.shape[1], 0)
    h = torch.einsum("sh,sih->si", xs, w1[e].float())
    act = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
    y = torch.einsum("si,shi->sh", act, w2[e].float()) * weights.reshape(-1, 1).float()
    return y.reshape(*ids.shape, -1).sum(1)


@pytest.mark.parametrize(
    "tokens,hidden,inter,experts,topk",
    [(16, 512, 256, 8, 2), (32, 1024, 512, 16, 4), (64, 1024, 512, 20, 8), (300, 256, 128, 8, 2)],
)
def test_fused_moe_matches_tilegyms_reference(tokens, hidden, inter, experts, topk) -> None:  # type: ignore[no-untyped-def]
    x, w1, w2, weights, ids = moe_inputs(tokens, hidden, inter, experts, topk, seed=0)
    got = ops.fused_moe(x, w1, w2, weights, ids)
    assert got.is_cuda and got.shape == x.shape and got.dtype == torch.bfloat16
    want = _reference(x, w1, w2, weights, ids)
    torch.testing.assert_close(got.float(), want, rtol=1e-1, atol=1e-1)


@pytest.mark.parametrize(
    "tokens,hidden,inter,experts,topk",
    [(16, 512, 256, 8, 2), (32, 1024, 512, 16, 4), (64, 1024, 512, 20, 8), (300, 256, 128, 8, 2)],
)
def test_fused_moe_backward_matches_autograd(tokens, hidden, inter, experts, topk) -> None:  # type: ignore[no-untyped-def]
    inputs, ids, dy, leaves = moe_backward_case(tokens, hidden, inter, experts, topk, seed=2)
    ops.fused_moe(*inputs, ids).backward(dy)
    for t, leaf in zip(inputs, leaves, strict=True):
        assert t.grad is not None and t.grad.is_cuda and t.grad.dtype == torch.bfloat16
        rel = float((t.grad.double() - leaf.grad).norm() / leaf.grad.norm())
        assert rel < 2e-2, rel


@pytest.mark.parametrize("tokens,topk,experts,block", [(16, 2, 8, 128), (4096, 8, 64, 64)])
def test_align_matches_the_reference(tokens, topk, experts, block) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(1)
    ids = torch.randint(0, experts, (tokens, topk), dtype=torch.int32, device="cuda")
    got = ops.moe_align_block_size(ids, block, experts)
    want = moe_align_reference(ids.cpu().numpy(), block, experts)
    assert all(g.is_cuda and g.dtype == torch.int32 for g in got)
    np.testing.assert_array_equal(got[0].cpu().numpy(), want[0])
    np.testing.assert_array_equal(got[1].cpu().numpy(), want[1])
    assert got[2].item() == want[2] and got[4].item() == want[4]
    np.testing.assert_array_equal(got[3].cpu().numpy(), want[3])


def test_a_bad_expert_id_is_raised_at_synchronize_from_a_replayed_call_too() -> None:
    """No call reads the ids back: the align kernel records an id outside [0, E) and drops its
    slot, and the next `fl.synchronize()` raises it at the call's line (ops/_device_checks.py),
    also where the call replayed (decode-size calls with int64 ids and bf16 weights, as a
    model's router gives them)."""
    import inspect

    import fearless as fl

    fl.synchronize()  # the launches since the last synchronisation share the words
    x, w1, w2, weights, ids = moe_inputs(4, 256, 128, 8, 2, seed=3)
    for _ in range(3):
        ops.fused_moe(x, w1, w2, weights, ids)
    fl.synchronize()
    plans = ops.fused_moe.plans.values()  # type: ignore[attr-defined]
    assert any(type(p).__name__ == "Plan" for p in plans), list(plans)
    bad = ids.clone()
    bad[3, 1] = 8
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    out = ops.fused_moe(x, w1, w2, weights, bad)  # replayed
    with pytest.raises(fl.KernelIndexError, match=r"`topk_ids\[3, 1\]` .* is 8, outside 0..7") as info:  # fmt: skip
        fl.synchronize()
    assert info.value.loc is not None and info.value.loc.line == line
    want = _reference(x, w1, w2, weights * (bad < 8), bad.clamp(max=7))  # the slot adds nothing
    torch.testing.assert_close(out.float(), want, atol=2e-2, rtol=2e-2)
    align = ops.moe_align_block_size(bad.to(torch.int32), 16, 8)
    with pytest.raises(fl.KernelIndexError, match=r"`topk_ids\[3, 1\]` of `fearless.ops.moe_align_block_size` is 8"):  # fmt: skip
        fl.synchronize()
    assert 3 * 2 + 1 not in align[0].tolist()  # the bad slot is placed nowhere
