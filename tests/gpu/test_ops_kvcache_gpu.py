"""`fearless.ops.flash_attn_with_kvcache` on the GPU at flash-attn's test shapes for the KV cache
(bf16 and f16, D 128, GQA 32 / 8 heads, contiguous and paged with pages of 256 and 16, ragged
cache_seqlens, causal, a window, a soft cap) against a torch float32 reference built here
from the same cache; a bad block id raised at `fl.synchronize()`, naming the sequence and
slot, with finite output (no other block read)."""

from __future__ import annotations

import inspect

import pytest

import fearless as fl
from fearless import ops

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _reference(q, k, v, lens, scale, causal, window, cap):  # type: ignore[no-untyped-def]
    """torch f32, one sequence at a time: query i at lens[b] - L + i (bottom-right)."""
    b, lq, h, d = q.shape
    rep = h // k.shape[2]
    out = torch.zeros(b, lq, h, d, device=q.device)
    left, right = window[0], 0 if causal else window[1]
    for s in range(b):
        n = int(lens[s])
        kk = k[s, :n].float().repeat_interleave(rep, 1)
        vv = v[s, :n].float().repeat_interleave(rep, 1)
        sc = torch.einsum("lhd,nhd->hln", q[s].float(), kk) * scale
        if cap > 0:
            sc = cap * torch.tanh(sc / cap)
        pos = n - lq + torch.arange(lq, device=q.device)[:, None]
        keys = torch.arange(n, device=q.device)[None, :]
        keep = torch.ones(lq, n, dtype=torch.bool, device=q.device)
        if left >= 0:
            keep &= keys >= pos - left
        if right >= 0:
            keep &= keys <= pos + right
        p = torch.softmax(sc.masked_fill(~keep, float("-inf")), -1).nan_to_num(0.0)
        out[s] = torch.einsum("hln,nhd->lhd", p, vv)
    return out


def _paged(k, v, page):  # type: ignore[no-untyped-def]
    b, s, hk, d = k.shape
    mb = -(-s // page)
    perm = torch.randperm(b * mb, device=k.device).to(torch.int32)
    table = perm.reshape(b, mb)
    blocks = []
    for x in (k, v):
        pad = torch.zeros(b, mb * page, hk, d, dtype=x.dtype, device=x.device)
        pad[:, :s] = x
        xb = torch.empty(b * mb, page, hk, d, dtype=x.dtype, device=x.device)
        xb[table.reshape(-1).long()] = pad.reshape(b * mb, page, hk, d)
        blocks.append(xb)
    return blocks[0], blocks[1], table


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("page", [None, 256, 16])
@pytest.mark.parametrize(
    "lq,causal,window,cap", [(1, False, (-1, -1), 0.0), (128, True, (-1, -1), 0.0),
                             (4, True, (256, 0), 0.0), (1, False, (-1, -1), 50.0),
                             (1, True, (100, 0), 0.0)]  # one query: the split-KV decode
)  # fmt: skip
def test_matches_torch(dtype, page, lq, causal, window, cap) -> None:  # type: ignore[no-untyped-def]
    b, s, h, hk, d = 3, 1000, 32, 8, 128
    q = torch.randn(b, lq, h, d, device="cuda").to(dtype)
    k, v = (torch.randn(b, s, hk, d, device="cuda").to(dtype) for _ in range(2))
    lens = torch.tensor([1000, 513, 129], dtype=torch.int32, device="cuda")
    want = _reference(q, k, v, lens.cpu(), d**-0.5, causal, window, cap)
    if page is None:
        got = ops.flash_attn_with_kvcache(q, k, v, lens, None, None, causal, window, cap)
    else:
        kb, vb, table = _paged(k, v, page)
        got = ops.flash_attn_with_kvcache(q, kb, vb, lens, table, None, causal, window, cap)
    torch.testing.assert_close(got.float(), want, atol=2e-2, rtol=2e-2)


def test_a_bad_block_id_is_raised_at_synchronize() -> None:
    # Launches with one table width share an error record until a synchronisation; after
    # several the message names the slot, not the value (kvcache_attention._Pending). The
    # paged test_matches_torch cases leave unsynchronised launches of this width (4) behind
    # them in the worker: start clean, so that this launch is the record's only one.
    fl.synchronize()
    q = torch.randn(2, 1, 8, 64, device="cuda").half()
    k, v = (torch.randn(2, 64, 2, 64, device="cuda").half() for _ in range(2))
    kb, vb, table = _paged(k, v, 16)
    table[1, 2] = 912
    lens = torch.tensor([64, 64], dtype=torch.int32, device="cuda")
    out = ops.flash_attn_with_kvcache(q, kb, vb, lens, table)
    with pytest.raises(fl.KernelIndexError, match=r"block_table\[1, 2\] = 912 is outside"):
        fl.synchronize()
    assert torch.isfinite(out).all()


def test_after_several_launches_the_slot_and_the_first_line_are_named() -> None:
    fl.synchronize()
    q = torch.randn(2, 1, 8, 64, device="cuda").half()
    k, v = (torch.randn(2, 64, 2, 64, device="cuda").half() for _ in range(2))
    kb, vb, table = _paged(k, v, 16)
    lens = torch.tensor([64, 64], dtype=torch.int32, device="cuda")
    first = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    ops.flash_attn_with_kvcache(q, kb, vb, lens, table)  # clean, and the first since the sync
    bad = table.clone()
    bad[0, 3] = -5
    ops.flash_attn_with_kvcache(q, kb, vb, lens, bad)
    with pytest.raises(fl.KernelIndexError, match=r"block_table\[0, 3\] is outside the cache in one of the 2 launches") as info:  # fmt: skip
        fl.synchronize()
    assert info.value.loc is not None and info.value.loc.line == first  # the first launch's
    fl.synchronize()  # the record was reset: nothing left to raise


def test_a_loop_synchronised_by_torch_alone_meets_the_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A loop that synchronises through torch alone runs no fearless check: a call reads the
    words without waiting (ops/_device_checks.py, every POLL_S: 0 here) and raises the bad
    block id, the call that made it or a later one, at the line of the first launch since the
    last check."""
    from fearless.ops import _device_checks

    fl.synchronize()
    monkeypatch.setattr(_device_checks, "POLL_S", 0.0)
    for pending in _device_checks._pending.values():  # a replay keeps its own words' record
        monkeypatch.setattr(pending, "next_read", 0.0)
    q = torch.randn(2, 1, 8, 64, device="cuda").half()
    k, v = (torch.randn(2, 64, 2, 64, device="cuda").half() for _ in range(2))
    kb, vb, table = _paged(k, v, 16)
    table[1, 2] = 912
    lens = torch.tensor([64, 64], dtype=torch.int32, device="cuda")
    line = inspect.currentframe().f_lineno + 3  # type: ignore[union-attr]
    with pytest.raises(fl.KernelIndexError, match=r"block_table\[1, 2\]") as info:
        for _ in range(3):
            ops.flash_attn_with_kvcache(q, kb, vb, lens, table)
            torch.cuda.synchronize()
    assert info.value.loc is not None and info.value.loc.line == line
    fl.synchronize()  # read and reset: nothing left to raise


def test_a_replayed_call_is_checked_as_a_first_call_is() -> None:
    """A decode loop's calls replay after the first one or two (ops/_replay.py): each replay
    still registers the check of its own table, so a bad block id in a replayed call is raised
    at the next synchronisation with its value and line, and no other block is read."""
    fl.synchronize()
    q = torch.randn(2, 1, 8, 64, device="cuda").half()
    k, v = (torch.randn(2, 64, 2, 64, device="cuda").half() for _ in range(2))
    kb, vb, table = _paged(k, v, 16)
    lens = torch.tensor([64, 50], dtype=torch.int32, device="cuda")
    for _ in range(3):
        ops.flash_attn_with_kvcache(q, kb, vb, lens, table)
    fl.synchronize()
    plans = ops.flash_attn_with_kvcache.plans.values()  # type: ignore[attr-defined]
    assert any(type(p).__name__ == "Plan" for p in plans)
    bad = table.clone()
    bad[1, 1] = 4096
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    out = ops.flash_attn_with_kvcache(q, kb, vb, lens, bad)  # replayed
    with pytest.raises(fl.KernelIndexError, match=r"block_table\[1, 1\] = 4096 is outside") as info:  # fmt: skip
        fl.synchronize()
    assert info.value.loc is not None and info.value.loc.line == line
    assert torch.isfinite(out).all()


def test_a_call_captured_in_a_cuda_graph_is_checked_at_its_replays() -> None:
    """A decode step captured by torch.cuda.graph runs no host step when it replays, yet its
    kernel writes the error words: the captured call's check stands (ops/_device_checks.py),
    so a bad block id written into the captured table is raised at the next
    `fl.synchronize()` after a replay, at the captured call's line; the graph stays usable."""
    fl.synchronize()
    q = torch.randn(2, 1, 8, 64, device="cuda").half()
    k, v = (torch.randn(2, 64, 2, 64, device="cuda").half() for _ in range(2))
    kb, vb, table = _paged(k, v, 16)
    lens = torch.tensor([64, 64], dtype=torch.int32, device="cuda")
    for _ in range(3):  # outside the capture: tune, compile, record the replay
        want = ops.flash_attn_with_kvcache(q, kb, vb, lens, table)
    fl.synchronize()
    g = torch.cuda.CUDAGraph()
    line = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]
    with torch.cuda.graph(g):
        out = ops.flash_attn_with_kvcache(q, kb, vb, lens, table)
    g.replay()
    fl.synchronize()  # a good table: nothing raised
    torch.testing.assert_close(out, want)
    good = int(table[1, 2])
    table[1, 2] = 4096
    g.replay()
    with pytest.raises(fl.KernelIndexError, match=r"block_table\[1, 2\] is outside the cache in a launch since the last synchronisation \(a replay of the CUDA graph captured at this line") as info:  # fmt: skip
        fl.synchronize()
    assert info.value.loc is not None and info.value.loc.line == line
    assert torch.isfinite(out).all()
    table[1, 2] = good
    g.replay()
    fl.synchronize()  # the words were reset: nothing left to raise
    torch.testing.assert_close(out, want)
