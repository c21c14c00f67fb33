"""`fearless.ops.flash_attn_with_kvcache` (DESIGN 2c): flash-attn's semantics (bottom-right
causal, windows, soft cap, GQA, ragged cache_seqlens incl. 0) against a float64 NumPy reference
on the simulator, contiguous and paged (pages of 16 and 4 in shuffled blocks); paged equals
contiguous on the same data; a bad block id or length is a KernelIndexError naming the sequence
and the slot, and reads nothing outside the cache nor another block; the torch operator and its
fake kernel; the refusals; the kernels through tileiras."""

from __future__ import annotations

import gc
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops._device_checks import NO_ERROR
from fearless.ops.kernels_kvcache import make_kvcache_attention, table_tile
from support.kvcache_ref import kvcache_reference as reference
from support.kvcache_ref import paged

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


def _inputs(b, lq, s, h, hk, d, dtype, seed=0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed + 1000 * lq + s)
    make = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    q, k, v = make(b, lq, h, d), make(b, s, hk, d), make(b, s, hk, d)
    t = lambda x: torch.from_numpy(x).to(getattr(torch, dtype))  # noqa: E731
    return t(q), t(k), t(v), rng


def _np(*xs):  # type: ignore[no-untyped-def]
    return [x.float().numpy() for x in xs]


def _rel(got, want: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    got = np.asarray(got.float().numpy() if hasattr(got, "float") else got, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


CASES = [  # ((B, L, S, H, H_kv, D), dtype, seqlens, causal, window, softcap, scale)
    ((3, 1, 70, 4, 2, 16), "float32", [70, 0, 33], False, (-1, -1), 0.0, None),  # decode, 0
    ((2, 5, 64, 4, 1, 32), "float32", [64, 20], True, (-1, -1), 0.0, None),  # MQA, causal
    ((2, 7, 50, 2, 2, 16), "float32", [9, 50], True, (6, -1), 0.0, 0.3),  # window left
    ((2, 6, 40, 4, 2, 16), "float32", [40, 17], False, (3, 2), 0.0, None),  # both sides
    ((2, 4, 48, 4, 2, 16), "float32", [48, 3], True, (-1, -1), 5.0, None),  # softcap, L > len
    ((2, 3, 80, 8, 2, 64), "float16", [80, 41], True, (16, 0), 0.0, None),
    ((2, 1, 90, 8, 4, 40), "bfloat16", [77, 90], False, (-1, -1), 30.0, None),  # D 40
]


def _case_id(c: tuple) -> str:
    return "-".join(map(str, (*c[0], c[1], c[3], *c[4], c[5])))


@pytest.mark.parametrize("case", CASES, ids=_case_id)
@pytest.mark.parametrize("page", [None, 16, 4])
def test_matches_the_reference(case: tuple, page: int | None) -> None:
    (b, lq, s, h, hk, d), dtype, lens, causal, window, cap, scale = case
    q, k, v, rng = _inputs(b, lq, s, h, hk, d, dtype)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    want = reference(*_np(q, k, v), np.array(lens), scale, causal, window, cap)
    if page is None:
        got = ops.flash_attn_with_kvcache(q, k, v, seqlens, None, scale, causal, window, cap)
    else:
        kb, vb, table = paged(*_np(k, v), page, rng)
        kb, vb = (torch.from_numpy(x).to(q.dtype) for x in (kb, vb))
        got = ops.flash_attn_with_kvcache(
            q, kb, vb, seqlens, torch.from_numpy(table), scale, causal, window, cap
        )
    assert got.dtype == q.dtype and got.shape == (b, lq, h, d)
    assert torch.isfinite(got).all()
    assert _rel(got, want) < TOL[dtype]


def test_paged_equals_contiguous_and_int_or_no_seqlens() -> None:
    q, k, v, rng = _inputs(2, 3, 37, 4, 2, 16, "float32")
    kb, vb, table = paged(*_np(k, v), 16, rng)
    pag = ops.flash_attn_with_kvcache(q.numpy(), kb, vb, 30, table, causal=True)
    con = ops.flash_attn_with_kvcache(q.numpy(), k.numpy(), v.numpy(), 30, causal=True)
    assert isinstance(pag, np.ndarray)
    np.testing.assert_allclose(pag, con, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(con, reference(*_np(q, k, v), np.array([30, 30]), causal=True),
                               rtol=1e-5, atol=1e-5)  # fmt: skip
    whole = ops.flash_attn_with_kvcache(q, k, v)  # None: the whole cache
    assert _rel(whole, reference(*_np(q, k, v), np.array([37, 37]))) < 1e-5
    fl_out = ops.flash_attn_with_kvcache(*(fl.asarray(x.numpy()) for x in (q, k, v)), 37)
    assert isinstance(fl_out, fl.Tensor) and _rel(fl_out.numpy(), whole.numpy()) < 1e-6


@pytest.mark.parametrize("flags", [(True, False, False), (True, True, False), (False, True, True)])
def test_small_tiles_skip_only_tiles_no_row_sees(flags: tuple) -> None:
    """The contiguous kernel with (16, 16) tiles (the simulator's autotuner takes 128-row
    ones): many key tiles skipped or masked on both sides of the window."""
    causal, left, right = flags
    b, lq, s, h, hk, d = 2, 40, 100, 2, 1, 16
    q, k, v, _ = _inputs(b, lq, s, h, hk, d, "float32")
    lens = np.array([100, 57], np.int32)
    wl, wr = 20, 5
    out = fl.empty((b, lq, h, d), dtype=fl.f32)
    err = fl.asarray(np.full(2, NO_ERROR, np.int32))
    kernel = make_kvcache_attention(fl.f32, False, causal, left, right, False)
    args = [fl.asarray(x.numpy()) for x in (q, k, v)] + [fl.asarray(lens), None, err]
    with out.partition((1, 16, 1, 16)) as part:
        kernel(part, *args, 0.25, wl, wr, 1.0, 16, 2, 1, 1)
    window = (wl if left else -1, wr if right else -1)
    want = reference(*_np(q, k, v), lens, 0.25, causal, window)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
    assert (err.numpy() == NO_ERROR).all()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("causal", [False, True])
def test_the_cache_past_the_lengths_never_reaches_the_output(causal: bool, value: float) -> None:
    """NaN or Inf in the cache rows past each sequence's length (a serving cache's unwritten
    torch.empty rows) leave the output bit for bit that of clean rows: the contiguous kernel
    with (16, 16) tiles (lengths 9, 37 and 50 inside a key tile, 32 on a tile's edge), the
    operator contiguous, and paged in pages of 16 and 4."""
    b, lq, s, h, hk, d = 4, 3, 64, 4, 2, 16
    q, k, v, _ = _inputs(b, lq, s, h, hk, d, "float32")
    lens = np.array([9, 37, 32, 50], np.int32)
    dirty = k.clone(), v.clone()
    for x in dirty:
        for i, n in enumerate(lens):
            x[i, n:] = value
    kernel = make_kvcache_attention(fl.f32, False, causal, False, False, False)
    outs = []
    for kv in ((k, v), dirty):
        out = fl.empty((b, lq, h, d), dtype=fl.f32)
        err = fl.asarray(np.full(2, NO_ERROR, np.int32))
        args = [fl.asarray(x.numpy()) for x in (q, *kv)] + [fl.asarray(lens), None, err]
        with out.partition((1, 16, 1, 16)) as part:
            kernel(part, *args, 0.25, 0, 0, 1.0, 16, 2, 1, 1)
        got = [out.numpy()]
        seqlens = torch.from_numpy(lens)
        got.append(ops.flash_attn_with_kvcache(q, *kv, seqlens, causal=causal).numpy())
        for page in (16, 4):  # the same shuffle of blocks for the clean and the dirty cache
            kb, vb, table = paged(*_np(*kv), page, np.random.default_rng(page))
            paged_out = ops.flash_attn_with_kvcache(q.numpy(), kb, vb, lens, table, causal=causal)
            got.append(paged_out)
        outs.append(got)
    want = reference(*_np(q, k, v), lens, None, causal)
    np.testing.assert_allclose(outs[0][1], want, rtol=1e-5, atol=1e-5)
    for clean, got in zip(*outs, strict=True):
        np.testing.assert_array_equal(got, clean)


def _bad_table_case():  # type: ignore[no-untyped-def]
    q, k, v, rng = _inputs(4, 2, 32, 2, 1, 16, "float32")
    kb, vb, table = paged(*_np(k, v), 4, rng, spare=0)  # 32 blocks, 8 slots a sequence
    return q, k, v, kb, vb, table


def test_a_bad_block_id_is_an_error_naming_the_sequence_and_slot() -> None:
    q, _, _, kb, vb, table = _bad_table_case()
    seqlens = np.array([32, 32, 32, 25], np.int32)  # sequence 3 uses slots 0..6
    for bad in (912, -1, 32):
        t = table.copy()
        t[3, 6] = bad
        with pytest.raises(
            fl.KernelIndexError,
            match=rf"block_table\[3, 6\] = {bad} is outside the cache's 32 blocks",
        ) as info:
            ops.flash_attn_with_kvcache(q.numpy(), kb, vb, seqlens, t)
        assert "test_ops_kvcache.py" in str(info.value)  # the user's line
    t = table.copy()
    t[3, 7] = 912  # a slot sequence 3 does not use: fine
    ops.flash_attn_with_kvcache(q.numpy(), kb, vb, seqlens, t)
    t[1, 2] = t[3, 6] = 10**6  # the first (sequence, slot) is named
    with pytest.raises(fl.KernelIndexError, match=r"block_table\[1, 2\]"):
        ops.flash_attn_with_kvcache(q.numpy(), kb, vb, seqlens, t)


def test_a_bad_block_id_reads_nothing_outside_nor_another_block() -> None:
    """The kernel itself (no operator check): a bad id reads no element outside the cache (the
    simulator would raise its bounds error) and no other block's data reaches the output: the
    clamped block 0 is NaN, and the output is that of the sequence without the bad page."""
    q, k, v, kb, vb, table = _bad_table_case()
    kb[0] = np.nan
    vb[0] = np.nan
    t = table.copy()
    t[1] = np.where(t[1] == 0, 31, t[1])  # no sequence uses block 0 ...
    t[0] = np.where(t[0] == 0, 31, t[0])
    t[2] = np.where(t[2] == 0, 31, t[2])
    t[3] = np.where(t[3] == 0, 31, t[3])
    t[1, 3] = 5000  # ... and sequence 1's slot 3 (keys 12..15) is outside the cache
    lens = np.array([32, 32, 32, 32], np.int32)
    out = fl.empty((4, 2, 2, 16), dtype=fl.f32)
    err = fl.asarray(np.full(2, NO_ERROR, np.int32))
    kernel = make_kvcache_attention(fl.f32, True, False, False, False, False)
    args = [fl.asarray(x) for x in (q.numpy(), kb, vb, lens, t)] + [err]
    with out.partition((1, 16, 1, 16)) as part:
        kernel(part, *args, 0.25, 0, 0, 1.0, 4, 2, 4, table_tile(8))
    assert err.numpy()[0] == 1 * 8 + 3 and err.numpy()[1] == NO_ERROR
    got = out.numpy()
    assert np.isfinite(got).all()
    keep = np.r_[0:12, 16:32]  # sequence 1 without its bad page
    want = reference(q.numpy()[1:2], k.numpy()[1:2, keep], v.numpy()[1:2, keep], [28], 0.25)
    np.testing.assert_allclose(got[1:2], want, rtol=1e-5, atol=1e-5)


def test_bad_seqlens_are_errors_naming_the_sequence() -> None:
    q, k, v, kb, vb, table = _bad_table_case()
    for lens, seq, n in (([32, 33, 0, 1], 1, 33), ([0, 0, -2, 40], 2, -2)):
        sl = np.array(lens, np.int32)
        with pytest.raises(
            fl.KernelIndexError, match=rf"cache_seqlens\[{seq}\] = {n} is outside the cache's 32"
        ):
            ops.flash_attn_with_kvcache(q.numpy(), kb, vb, sl, table)
        with pytest.raises(fl.KernelIndexError, match=rf"cache_seqlens\[{seq}\] = {n}"):
            ops.flash_attn_with_kvcache(q.numpy(), k.numpy(), v.numpy(), sl)
    with pytest.raises(fl.KernelIndexError, match="cache_seqlens = 33 is outside"):
        ops.flash_attn_with_kvcache(q.numpy(), k.numpy(), v.numpy(), 33)


def test_refusals_are_fearless_errors() -> None:
    q, k, v, kb, vb, table = _bad_table_case()
    with pytest.raises(fl.KernelTypeError, match="dtypes"):
        ops.flash_attn_with_kvcache(q, k.half(), v.half())
    with pytest.raises(fl.KernelTypeError, match="H not a multiple of H_kv"):
        ops.flash_attn_with_kvcache(q[:, :, :1], k.expand(4, 32, 2, 16), v.expand(4, 32, 2, 16))
    with pytest.raises(fl.KernelTypeError, match="a cache of 2 sequences for 4"):
        ops.flash_attn_with_kvcache(q, k[:2], v[:2])
    with pytest.raises(fl.KernelTypeError, match=r"takes i32 tensors, but `block_table` is i64"):
        ops.flash_attn_with_kvcache(q.numpy(), kb, vb, None, table.astype(np.int64))
    with pytest.raises(fl.KernelTypeError, match=r"must be \(batch, max_num_blocks_per_seq\)"):
        ops.flash_attn_with_kvcache(q.numpy(), kb, vb, None, table[:2])
    with pytest.raises(fl.KernelTypeError, match=r"`cache_seqlens` .* shape \(batch,\) = \(4,\)"):
        ops.flash_attn_with_kvcache(q, k, v, torch.zeros(3, dtype=torch.int32))
    with pytest.raises(fl.KernelTypeError, match="window_size"):
        ops.flash_attn_with_kvcache(q, k, v, window_size=(-2, 0))
    with pytest.raises(fl.KernelTypeError, match="softcap"):
        ops.flash_attn_with_kvcache(q, k, v, softcap=-1.0)
    with pytest.raises(fl.KernelTypeError, match="has no backward yet"):
        ops.flash_attn_with_kvcache(q.requires_grad_(), k, v)


def test_torch_operator_fake_kernel_and_compile() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    q, k, v, rng = _inputs(2, 3, 20, 4, 2, 16, "float32")
    kb, vb, table = paged(*_np(k, v), 4, rng)
    kb, vb, table = (torch.from_numpy(x) for x in (kb, vb, table))
    sl = torch.tensor([20, 11], dtype=torch.int32)
    want = reference(*_np(q, k, v), np.array([20, 11]), None, True, (4, -1), 2.0)
    got = torch.ops.fearless.flash_attn_with_kvcache(q, kb, vb, sl, table, None, True, [4, 0], 2.0)
    assert _rel(got, want) < 1e-5
    with FakeTensorMode():
        out = torch.ops.fearless.flash_attn_with_kvcache(
            torch.empty(2, 3, 4, 16), torch.empty(5, 4, 2, 16), torch.empty(5, 4, 2, 16)
        )
        assert out.shape == (2, 3, 4, 16)

    def block(q, kb, vb, sl, table):  # type: ignore[no-untyped-def]
        return ops.flash_attn_with_kvcache(q, kb, vb, sl, table, causal=True, window_size=(4, 9),
                                           softcap=2.0)  # fmt: skip

    got = torch.compile(block, fullgraph=True, backend="aot_eager")(q, kb, vb, sl, table)
    assert _rel(got, want) < 1e-5


@pytest.mark.parametrize("page", [None, 4, 16, 256])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_kernels_compile_through_tileiras(cubin: Callable[..., bytes], page: int | None,
                                          dtype: str) -> None:  # fmt: skip
    dt = getattr(fl, dtype)
    q = fl.zeros((4, 1, 32, 128), dtype=dt)
    out = fl.empty(q.shape, dtype=dt).partition((1, 64, 1, 128))
    lens, err = fl.zeros((4,), dtype=fl.i32), fl.zeros((2,), dtype=fl.i32)
    if page is None:
        kv = fl.zeros((4, 1000, 8, 128), dtype=dt)
        kernel = make_kvcache_attention(dt, False, True, True, False, True, occupancy=2)
        assert cubin(kernel, out, q, kv, kv, lens, None, err, 0.1, 255, 0, 50.0, 64, 4, 1, 1)
    else:
        kv = fl.zeros((64, page, 8, 128), dtype=dt)
        table = fl.zeros((4, 4096 // page), dtype=fl.i32)
        kernel = make_kvcache_attention(dt, True, True, False, False, False, occupancy=2)
        tn = min(page, 64)
        mbp = table_tile(4096 // page)
        assert cubin(kernel, out, q, kv, kv, lens, table, err, 0.1, 0, 0, 1.0, tn, 4, page, mbp)


def test_deferred_checks_run_once_and_raise_the_first() -> None:
    """The GPU path's hand-off (runtime/device_errors.py): checks deferred by the operator run
    at the next synchronisation, all of them, once; the first error goes up."""
    from fearless.runtime import device_errors

    ran: list[int] = []

    def failing(n: int):  # type: ignore[no-untyped-def]
        def check() -> None:
            ran.append(n)
            raise fl.KernelIndexError(f"check {n}")

        return check

    device_errors.defer(failing(1))
    device_errors.defer(failing(2))
    with pytest.raises(fl.KernelIndexError, match="check 1"):
        device_errors._run_deferred()
    assert ran == [1, 2]
    device_errors._run_deferred()  # nothing left
    assert ran == [1, 2]


def test_the_gpu_path_keeps_one_pending_record_however_many_launches() -> None:
    """On the GPU the launches with one table width share one error buffer and one deferred
    check (ops/_device_checks.py `Pending`), so a loop that never synchronises through
    fearless holds two words, not a check per call. One launch's error names its block id;
    after several, the sequence and slot and the first launch's line; the check leaves the
    words clean for the next launches. (Driven here with simulator tensors.)"""
    from fearless.ops import _device_checks, _io
    from fearless.ops import kvcache_attention as kv
    from fearless.runtime import device_errors

    table = _io.operand(np.array([[0, 1], [2, 77]], np.int32), kv.OP, "block_table").tensor
    lens = fl.asarray(np.array([32, 32], np.int32))
    err = fl.asarray(np.full(2, NO_ERROR, np.int32))
    pending = _device_checks.Pending(err)

    def check() -> kv._Check:
        return kv._Check(2, 8, 32, 16, table, lens, None)

    before = len(device_errors._deferred)
    for _ in range(3):
        pending.launched(check())
    assert len(device_errors._deferred) == before + 1  # registered once
    device_errors._deferred.remove(pending.run)
    err._host[0] = 1 * 2 + 1  # sequence 1, slot 1
    with pytest.raises(
        fl.KernelIndexError,
        match=r"block_table\[1, 1\] is outside the cache "
        r"in one of the 3 launches since the last synchronisation",
    ):
        pending.run()
    assert (err._host == NO_ERROR).all() and pending.calls == 0
    pending.launched(check())
    device_errors._deferred.remove(pending.run)
    err._host[0] = 3
    with pytest.raises(
        fl.KernelIndexError,
        match=r"block_table\[1, 1\] = 77 is outside the "
        r"cache's 8 blocks",
    ):
        pending.run()
    pending.launched(check())
    device_errors._deferred.remove(pending.run)
    pending.run()  # nothing recorded: nothing raised


@pytest.fixture
def fake_gpu_call(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, ...]]:
    """A paged decode call's arguments for flash_attn_with_kvcache on tests/support's fake GPU (its kernels
    run nothing, so a test writes the error words as a kernel would; tuning off; fresh error
    words and replay plans), its table's slot 1 of sequence 1 holding 77 of 8 blocks."""
    pytest.importorskip("torch")  # the warm path runs where torch is loaded
    from fearless.ops import _device_checks
    from fearless.runtime import device_errors
    from support.fake_memory import install_tile_gpu

    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")
    fake = install_tile_gpu(monkeypatch.setattr)
    monkeypatch.setattr(fake, "cuLaunchKernel", lambda *a: (fake.CUresult.CUDA_SUCCESS,))
    monkeypatch.setattr(_device_checks, "_pending", {})
    monkeypatch.setattr(device_errors, "_deferred", [])  # no standing check of another test
    monkeypatch.setattr(_device_checks, "POLL_S", float("inf"))  # checked at synchronize only
    plans = ops.flash_attn_with_kvcache.plans  # type: ignore[attr-defined]
    plans.clear()
    q = fl.zeros((2, 1, 4, 64), dtype=fl.f16)
    kb, vb = (fl.zeros((8, 16, 2, 64), dtype=fl.f16) for _ in range(2))
    lens = fl.asarray(np.array([20, 32], np.int32))
    table = fl.asarray(np.array([[0, 1], [2, 77]], np.int32))
    yield q, kb, vb, lens, table
    plans.clear()
    # what a test leaves in reference cycles (a caught error's traceback holds its frame) is
    # collected while this fake is still the driver (as tests/test_host_arrays.py's `gpu`)
    gc.collect()


def _words_written(words: list[int]) -> None:
    """Write the error words of the one pending record, as a kernel would."""
    from fearless.ops import _device_checks
    from fearless.runtime import driver

    (pending,) = _device_checks._pending.values()
    driver.copy_host_to_device(pending.err.data_ptr, np.array(words, np.int32))


def test_replayed_calls_on_the_gpu_are_checked_each_at_its_own_line(
    fake_gpu_call: tuple[Any, ...],
) -> None:
    """On the GPU a decode loop's calls replay (ops/_replay.py) after the first: the error words
    stay the operator's own buffer and each replay registers the check of its own call, so a
    bad block id the kernel records is still raised at the next synchronisation, naming the
    replayed call's line."""
    for _ in range(3):
        ops.flash_attn_with_kvcache(*fake_gpu_call)
    fl.synchronize()  # the words record nothing: nothing raised
    plans = ops.flash_attn_with_kvcache.plans  # type: ignore[attr-defined]
    assert [type(p).__name__ for p in plans.values()] == ["Plan"]
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    ops.flash_attn_with_kvcache(*fake_gpu_call)  # a replay
    _words_written([1 * 2 + 1, NO_ERROR])  # sequence 1, slot 1
    with pytest.raises(
        fl.KernelIndexError, match=r"block_table\[1, 1\] = 77 is outside the cache's 8 blocks"
    ) as caught:
        fl.synchronize()
    assert caught.value.loc is not None and caught.value.loc.line == line
    assert caught.value.loc.file == __file__


def test_a_call_captured_in_a_graph_leaves_a_check_standing(
    fake_gpu_call: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call captured into a CUDA graph (torch's or `fl.graph`) runs no host step at the
    graph's replays, yet each replay may write the error words: the captured call's check
    stands, and every later synchronisation reads the words, naming the captured call's line.
    (Capture stood in for by `capturing()`.)"""
    from fearless.ops import _device_checks

    ops.flash_attn_with_kvcache(*fake_gpu_call)  # outside the capture
    fl.synchronize()
    monkeypatch.setattr(_device_checks, "capturing", lambda: True)
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    ops.flash_attn_with_kvcache(*fake_gpu_call)  # "captured"
    monkeypatch.setattr(_device_checks, "capturing", lambda: False)
    fl.synchronize()  # nothing recorded yet
    for _ in range(2):  # two replays of the graph, each synchronised after
        _words_written([1 * 2 + 1, NO_ERROR])
        with pytest.raises(
            fl.KernelIndexError,
            match=r"block_table\[1, 1\] is outside the cache in a launch since the last "
            r"synchronisation \(a replay of the CUDA graph captured at this line",
        ) as caught:
            fl.synchronize()
        assert caught.value.loc is not None and caught.value.loc.line == line
    fl.synchronize()  # clean words: nothing raised, and the check still stands
    (pending,) = _device_checks._pending.values()
    assert pending.standing is not None and pending.deferred


def test_a_loop_that_never_synchronises_meets_the_error_at_a_later_call(
    fake_gpu_call: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A serving loop that synchronises only through torch (`.item()`) runs no fearless check:
    every POLL_S (0 here) a call reads the words without waiting, and a record there is
    raised by that call, at the line of the first launch since the last check."""
    from fearless.ops import _device_checks

    monkeypatch.setattr(_device_checks, "POLL_S", 0.0)
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    ops.flash_attn_with_kvcache(*fake_gpu_call)  # its words read clean: nothing raised
    _words_written([1 * 2 + 1, NO_ERROR])  # that launch's kernel records slot 1 of sequence 1
    with pytest.raises(
        fl.KernelIndexError,
        match=r"block_table\[1, 1\] is outside the cache in one of the 2 launches since the "
        r"last synchronisation \(the first at this line\)",
    ) as caught:
        ops.flash_attn_with_kvcache(*fake_gpu_call)
    assert caught.value.loc is not None and caught.value.loc.line == line
    ops.flash_attn_with_kvcache(*fake_gpu_call)  # the words were cleared: nothing raised
    fl.synchronize()


def test_no_read_of_the_words_while_capturing(
    fake_gpu_call: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call captured into a CUDA graph never reads or raises (a copy or a synchronisation
    would break the capture): its check stands for the next synchronisation."""
    from fearless.ops import _device_checks

    monkeypatch.setattr(_device_checks, "POLL_S", 0.0)
    ops.flash_attn_with_kvcache(*fake_gpu_call)
    _words_written([1 * 2 + 1, NO_ERROR])
    monkeypatch.setattr(_device_checks, "capturing", lambda: True)
    ops.flash_attn_with_kvcache(*fake_gpu_call)  # "captured": nothing raised
    monkeypatch.setattr(_device_checks, "capturing", lambda: False)
    with pytest.raises(fl.KernelIndexError, match=r"block_table\[1, 1\]"):
        fl.synchronize()


def test_a_process_that_ends_unchecked_prints_what_the_words_record(
    fake_gpu_call: tuple[Any, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    """At exit nothing can raise any more: launches never checked are read and their error
    printed on stderr (`_device_checks._at_exit`, registered with the first words)."""
    from fearless.ops import _device_checks

    ops.flash_attn_with_kvcache(*fake_gpu_call)
    _words_written([1 * 2 + 1, NO_ERROR])
    _device_checks._at_exit()
    err = capsys.readouterr().err
    assert "the process ended before one raised it" in err
    assert "block_table[1, 1]" in err and "is outside the cache" in err, err
    _device_checks._at_exit()  # checked now: nothing more to say
    assert capsys.readouterr().err == ""
