"""`fearless.ops.scaled_dot_product_attention` (DESIGN 2b): torch's signature and semantics
(is_causal top-left aligned, scale, enable_gqa), against torch's own on the simulator; the
refusals at the caller's line; the kernel through tileiras; the GPU against torch. Its backward
with a mask: tests/test_ops_attention_mask_backward.py."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops import kernels_attention_backward as KB
from fearless.ops.kernels_attention import make_attention
from fearless.ops.kernels_attention_decode import DECODE_CONFIGS

torch = pytest.importorskip("torch")
F = torch.nn.functional

CASES = [  # (B, H, H_kv, L, S, D, causal, dtype)
    (1, 2, 2, 100, 100, 64, False, "float32"),
    (2, 4, 2, 64, 128, 32, True, "float16"),  # GQA, L < S
    (1, 2, 1, 37, 70, 40, True, "bfloat16"),  # D not a power of two, ragged tiles
    (1, 1, 1, 130, 33, 16, False, "float32"),  # L > S
    (1, 3, 3, 90, 50, 64, True, "float16"),  # causal with L > S: late queries see every key
    (1, 2, 1, 70, 66, 128, True, "float32"),  # D 128's backward configurations, GQA
]
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


def _inputs(b, h, hk, lq, s, d, dtype):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(lq * 1000 + s)
    make = lambda *shape: torch.randn(*shape, generator=g).to(getattr(torch, dtype))  # noqa: E731
    return make(b, h, lq, d), make(b, hk, s, d), make(b, hk, s, d)


def _rel(got, want) -> float:  # type: ignore[no-untyped-def]
    return float((got.double() - want).norm() / want.norm())


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_matches_torch(case: tuple) -> None:
    b, h, hk, lq, s, d, causal, dtype = case
    q, k, v = _inputs(b, h, hk, lq, s, d, dtype)
    gqa = hk != h
    got = ops.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    want = F.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), is_causal=causal, enable_gqa=gqa
    )
    assert got.dtype == q.dtype and got.shape == q.shape
    assert _rel(got, want) < TOL[dtype]


def test_scale_three_dimensional_inputs_and_fl_tensors() -> None:
    q, k, v = _inputs(2, 1, 1, 48, 80, 32, "float32")
    q3, k3, v3 = q[:, 0], k[:, 0], v[:, 0]
    got = ops.scaled_dot_product_attention(q3, k3, v3, scale=0.3)
    want = F.scaled_dot_product_attention(q3.double(), k3.double(), v3.double(), scale=0.3)
    assert got.shape == q3.shape and _rel(got, want) < 1e-5
    fl_out = ops.scaled_dot_product_attention(
        fl.asarray(q.numpy()), fl.asarray(k.numpy()), fl.asarray(v.numpy()), None, True
    )
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    assert isinstance(fl_out, fl.Tensor)
    np.testing.assert_allclose(fl_out.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("mask_shape", "kind", "causal"),
    [((40, 70), "bool", False), ((2, 1, 40, 70), "float", True), ((1, 2, 40, 70), "bool", True)],
)
def test_masks_bool_and_additive_broadcast_over_batch_and_heads(
    mask_shape: tuple, kind: str, causal: bool
) -> None:
    q, k, v = _inputs(2, 2, 2, 40, 70, 32, "float32")
    g = torch.Generator().manual_seed(5)
    if kind == "bool":
        mask = torch.rand(*mask_shape, generator=g) > 0.3
        mask[..., 0] = True  # every query keeps a key
    else:
        mask = torch.randn(*mask_shape, generator=g)
    got = ops.scaled_dot_product_attention(q, k, v, mask, causal)
    full = mask if kind == "bool" else mask.double()
    if causal:  # torch takes a mask or is_causal, not both: join them
        tril = torch.ones(40, 70, dtype=torch.bool).tril()
        full = full & tril if kind == "bool" else full.masked_fill(~tril, float("-inf"))
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=full)
    assert _rel(got, want) < 1e-5


DECODE_CASES = [  # (B, H, H_kv, S, D, dtype): one query per head
    (2, 8, 2, 1000, 64, "float32"),
    (1, 4, 4, 300, 128, "float16"),
    (3, 6, 2, 129, 40, "bfloat16"),  # a group of 3 (padded to 8 rows), ragged S and D
]


@pytest.mark.parametrize("case", DECODE_CASES, ids=lambda c: "-".join(map(str, c)))
def test_decode_steps_split_the_keys_and_match_torch(case: tuple) -> None:
    b, h, hk, s, d, dtype = case
    q, k, v = _inputs(b, h, hk, 1, s, d, dtype)
    got = ops.scaled_dot_product_attention(q, k, v, enable_gqa=hk != h)
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), enable_gqa=hk != h)
    assert got.shape == q.shape and _rel(got, want) < TOL[dtype]


@pytest.mark.parametrize("sms", [1, 132])
def test_decode_splits_as_the_h200_does_match_torch(sms: int) -> None:
    """The simulator's 4 SMs give one split per head at DECODE_CASES' shapes; the H200's 132
    give many (b * hk = 4: 33 splits, capped by the keys), so that launch is held here too."""
    from fearless.ops.kernels_attention_decode import attention_decode

    b, h, hk, s, d = 2, 8, 2, 1000, 64
    q, k, v = _inputs(b, h, hk, 1, s, d, "float32")
    group = h // hk
    qd = fl.asarray(q.reshape(b, hk, group, d).numpy())
    out = fl.empty(qd.shape, dtype=fl.f32)
    attention_decode(qd, fl.asarray(k.numpy()), fl.asarray(v.numpy()), out, d**-0.5, sms)
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), enable_gqa=True)
    got = torch.from_numpy(out.numpy()).reshape(b, h, 1, d)
    assert _rel(got, want) < TOL["float32"]


def test_the_decode_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    from fearless.ops import kernels_attention_decode as ka

    q = fl.zeros((2, 2, 4, 128), dtype=fl.f16)  # (B, H_kv, GROUP, D)
    kv = fl.zeros((2, 2, 1000, 128), dtype=fl.f16)
    part_o = fl.empty((2, 2, 4, 4, 128)).partition((1, 1, 1, 8, 128))
    part_lse = fl.empty((2, 2, 4, 4, 1)).partition((1, 1, 1, 8, 1))
    for tile_n in (64, 128):
        assert cubin(ka.make_decode_split(fl.f16), part_o, part_lse, q, kv, kv, 0.088, tile_n, 2)
    out = fl.empty((2, 2, 4, 128), dtype=fl.f16).partition((1, 1, 8, 128))
    assert cubin(ka.make_decode_one(fl.f16), out, q, kv, kv, 0.088, 128)
    combine = ka.make_decode_combine(fl.f16)
    assert cubin(combine, out, fl.zeros((2, 2, 3, 4, 128)), fl.zeros((2, 2, 3, 4, 1)), 4)


@pytest.mark.parametrize("config", DECODE_CONFIGS, ids=lambda c: "-".join(map(str, c.values())))
def test_every_decode_configuration_matches_torch(config: dict) -> None:
    """Each configuration the tuner may choose, with the H200's 132 SMs (splits) and with one
    SM (one split: the output stored by the walking block)."""
    from fearless.ops.kernels_attention_decode import attention_decode

    b, h, hk, s, d = 1, 4, 2, 700, 64
    q, k, v = _inputs(b, h, hk, 1, s, d, "float32")
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), enable_gqa=True)
    for sms in (1, 132):
        qd = fl.asarray(q.reshape(b, hk, h // hk, d).numpy())
        out = fl.empty(qd.shape, dtype=fl.f32)
        kf, vf = fl.asarray(k.numpy()), fl.asarray(v.numpy())
        attention_decode.fn(qd, kf, vf, out, d**-0.5, sms, **config)
        got = torch.from_numpy(out.numpy()).reshape(b, h, 1, d)
        assert _rel(got, want) < TOL["float32"], sms


def _line(marker: str) -> int:
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    lines, first = inspect.getsourcelines(frame.f_back.f_code)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def test_what_it_refuses_is_said_at_the_callers_line() -> None:
    q, k, v = _inputs(1, 4, 2, 16, 16, 16, "float32")
    sdpa = ops.scaled_dot_product_attention
    mask = torch.ones(1, 16, dtype=torch.bool)  # broadcast along L: not taken
    with pytest.raises(fl.KernelTypeError, match=r"`attn_mask` .* has shape \(1, 16\)") as info:
        sdpa(q, k, v, mask, enable_gqa=True)  # here: mask
    assert info.value.loc is not None and info.value.loc.line == _line("here: mask")
    with pytest.raises(fl.KernelTypeError, match="attn_mask"):
        sdpa(q, k, v, torch.ones(16, 16, dtype=torch.int32), enable_gqa=True)
    with pytest.raises(fl.KernelTypeError, match="no attention dropout"):
        sdpa(q, q, q, dropout_p=0.1)
    with pytest.raises(fl.KernelTypeError, match=r"4 query heads and 2 key/value heads \(pass"):
        sdpa(q, k, v)
    with pytest.raises(fl.KernelTypeError, match="dtypes f32, f16 and f32"):
        sdpa(q, q.half(), q)
    with pytest.raises(fl.KernelTypeError, match="shapes"):
        sdpa(q[0, 0], q[0, 0], q[0, 0])


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_gradients_match_torch(case: tuple) -> None:
    """torch autograd through `torch.ops.fearless`: flash attention's backward kernels."""
    b, h, hk, lq, s, d, causal, dtype = case
    q, k, v = (t.requires_grad_() for t in _inputs(b, h, hk, lq, s, d, dtype))
    gqa = hk != h
    out = ops.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(out.dtype)
    out.backward(dout)
    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*ref, is_causal=causal, enable_gqa=gqa).backward(dout.double())
    for got, want in zip((q, k, v), ref, strict=True):
        assert got.grad is not None and want.grad is not None
        assert got.grad.dtype == got.dtype and _rel(got.grad, want.grad) < 2 * TOL[dtype]


@pytest.mark.parametrize("causal", [False, True])
def test_three_dimensional_gradients_match_torch_in_every_batch(causal: bool) -> None:
    """(B, L, D) inputs in training: the forward keeps a (B, L) lse, which the backward reads as
    (B, 1, L), one head per batch entry as the forward views q (it once read (1, B, L): every
    batch entry but the first got the padding's lse and silently wrong gradients)."""
    gen = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(3, lk, 16, generator=gen) for lk in (6, 9, 9))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = ops.scaled_dot_product_attention(*leaves, is_causal=causal)
    dout = torch.randn(out.shape, generator=gen)
    out.backward(dout)
    ref = [t.double().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*ref, is_causal=causal).backward(dout.double())
    for got, want in zip(leaves, ref, strict=True):
        assert got.grad is not None and want.grad is not None
        for i in range(3):
            assert _rel(got.grad[i], want.grad[i]) < 1e-5, i


def test_training_keeps_the_forwards_lse_for_the_backward(monkeypatch: pytest.MonkeyPatch) -> None:
    """With grad, the forward is `scaled_dot_product_attention_lse` (out and the rows' base-2
    log-sum-exp, +inf where a row sees no key) and the backward takes its lse instead of
    recomputing it: the same gradients as the operator that recomputes; lse itself takes no
    gradient."""
    from fearless.ops.attention import scaled_dot_product_attention_lse

    q, k, v = _inputs(1, 4, 2, 40, 56, 32, "float32")
    mask = torch.ones(40, 56, dtype=torch.bool)
    mask[3] = False  # row 3 sees no key
    out, lse = scaled_dot_product_attention_lse(q, k, v, mask, True, 0.3, True)
    scores = (q @ k.repeat_interleave(2, 1).transpose(-1, -2)) * 0.3
    keep = mask & torch.ones(40, 56, dtype=torch.bool).tril()
    want = torch.logsumexp(scores.masked_fill(~keep, -torch.inf), -1) / np.log(2)
    assert lse.dtype == torch.float32 and lse.shape == (1, 4, 40)
    assert torch.isinf(lse[:, :, 3]).all() and torch.isfinite(lse[:, :, 4:]).all()
    assert _rel(lse[:, :, 4:], want[:, :, 4:]) < 1e-5
    assert torch.equal(out, ops.scaled_dot_product_attention(q, k, v, mask, True, 0.3, True))
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(5))
    grads = []
    for forward in (
        ops.scaled_dot_product_attention,
        torch.ops.fearless.scaled_dot_product_attention,
    ):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        with monkeypatch.context() as m:
            if forward is ops.scaled_dot_product_attention:  # its backward recomputes no lse
                m.setattr(KB, "make_attention_stats", None)
            forward(*leaves, mask, True, 0.3, True).backward(dout)
        grads.append([t.grad for t in leaves])
    for kept, recomputed in zip(*grads, strict=True):
        assert torch.allclose(kept, recomputed, rtol=1e-5, atol=1e-6)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out, lse = torch.ops.fearless.scaled_dot_product_attention_lse(*leaves, None, True, 0.3, True)
    assert out.requires_grad and not lse.requires_grad


def test_the_backward_makes_no_zero_gradient_for_the_lse() -> None:
    """The kept lse never has a gradient, and autograd does not make one of zeros for it (an
    allocation and a fill on every training call's host path): no (B, H, L) zeros in the
    backward."""
    from torch.profiler import ProfilerActivity, profile

    leaves = [t.requires_grad_() for t in _inputs(1, 2, 2, 24, 24, 16, "float32")]
    out = ops.scaled_dot_product_attention(*leaves, is_causal=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        out.backward(torch.ones_like(out))
    made = [e.input_shapes for e in prof.events() if e.name in ("aten::zeros", "aten::zero_")]
    assert [1, 2, 24] not in [shape for shapes in made for shape in shapes], made


def test_the_atomic_dq_adds_whole_tiles() -> None:
    """dk_dv's FlashAttention-2 dQ adds each pair's (rows, D) tile with one
    `tile.atomic_store_add` (a TMA reduction on sm_90), never per-element atomics (a REDG
    each four elements: 3-6% slower forward + backward on the H100, session 35), also where D
    (40) is not the tile's (64) and the keys fill no whole tile."""
    from fearless.ops.kernels_attention_backward_tiles import make_attention_dkdv

    q, kv = fl.zeros((1, 4, 200, 40), dtype=fl.bf16), fl.zeros((1, 2, 150, 40), dtype=fl.bf16)
    stats = fl.zeros((1, 4, 200))
    dk, dv = (fl.empty(kv.shape, dtype=fl.bf16).partition((1, 1, 64, 64)) for _ in range(2))
    kernel = make_attention_dkdv(fl.bf16, True, False, atomic_dq=True)
    args = (dk, dv, fl.zeros((1, 4, 200, 40)), q, kv, kv, q, stats, stats, None, None, None)
    text = kernel.inspect(*args, 0.125, 0, 0, 1.0, 64, 2, stage="ir")
    assert text.count("tile.atomic_store ") == 1 and "tile.atomic_rmw" not in text


def test_the_delta_kernel_zeroes_the_atomic_dqs_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """In training at head dim <= DQ_BY_ATOMICS_UP_TO, the f32 scratch the atomic dQ adds into
    is zeroed by the delta kernel beside its rows, not by a fill of its own: nothing is made
    zeroed, and a scratch that starts as NaN gives torch's gradients."""
    from fearless.ops import _io

    q, k, v = _inputs(1, 2, 2, 70, 70, 40, "float32")  # ragged rows and columns of the tiles
    assert KB.atomic_dq(40)
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(3))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*leaves, is_causal=True).backward(dout)
    made: list[tuple[str, tuple[int, ...]]] = []

    def nan_scratch(t: Any, shape: tuple[int, ...], dtype: Any) -> Any:
        made.append(("empty", shape))
        if len(shape) < 4:
            return _io.empty_beside(t, shape, dtype)
        return _io.from_torch(torch.full(shape, torch.nan, dtype=torch.float32))

    def zeros(t: Any, shape: tuple[int, ...], dtype: Any) -> Any:
        made.append(("zeros", shape))
        return _io.zeros_beside(t, shape, dtype)

    monkeypatch.setattr(KB, "empty_beside", nan_scratch)
    monkeypatch.setattr(KB, "zeros_beside", zeros)
    got = [t.clone().requires_grad_() for t in (q, k, v)]
    ops.scaled_dot_product_attention(*got, is_causal=True).backward(dout)
    assert made == [("empty", (1, 2, 70)), ("empty", (1, 2, 70, 40))], made
    for mine, theirs in zip(got, leaves, strict=True):
        assert _rel(mine.grad, theirs.grad) < 1e-5


def _partition_orders(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The `order=` of every `fl.Tensor.partition` from now on (the kernels' Parts), in order."""
    orders: list[object] = []
    made = fl.Tensor.partition

    def spy(t: fl.Tensor, shape: tuple[int, ...], order: Any = None) -> object:
        orders.append(order)
        return made(t, shape, order)

    monkeypatch.setattr(fl.Tensor, "partition", spy)
    return orders


def test_the_attention_kernels_partition_row_major(monkeypatch: pytest.MonkeyPatch) -> None:
    """The forward's and the backward's Parts are made in `tile.row_major()` order (one head's
    query tiles launch together), every one of them."""
    from fearless import tile

    orders = _partition_orders(monkeypatch)
    q, k, v = (t.requires_grad_() for t in _inputs(1, 2, 2, 20, 24, 16, "float32"))
    ops.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    assert len(orders) >= 6 and all(o == tile.row_major() for o in orders), orders


def test_longest_first_order_gives_the_same_causal_attention(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With `LONGEST_FIRST` (an experiment's switch), the causal forward numbers its query
    tiles from the last (`tile.row_major(reverse=(2,))`) and its output and lse are the same."""
    from fearless import tile
    from fearless.ops import kernels_attention as KA

    q, k, v = _inputs(2, 4, 2, 200, 200, 32, "float32")
    want = F.scaled_dot_product_attention(
        q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), is_causal=True
    )
    orders = _partition_orders(monkeypatch)
    monkeypatch.setattr(KA, "LONGEST_FIRST", True)
    from fearless.ops.attention import scaled_dot_product_attention_lse

    out, lse = scaled_dot_product_attention_lse(q, k, v, None, True, None, True)
    assert orders and all(o == tile.row_major(reverse=(2,)) for o in orders), orders
    assert _rel(out, want) < 1e-5
    monkeypatch.setattr(KA, "LONGEST_FIRST", False)
    out2, lse2 = scaled_dot_product_attention_lse(q, k, v, None, True, None, True)
    assert torch.equal(out, out2) and torch.equal(lse, lse2)
    # the backward's dq kernel (taken where the atomic dQ is not) takes the order too
    monkeypatch.setattr(KB, "DQ_BY_ATOMICS_UP_TO", 0)
    q, k, v = _inputs(1, 2, 2, 70, 70, 80, "float32")
    grads = []
    for on in (True, False):
        monkeypatch.setattr(KA, "LONGEST_FIRST", on)
        orders.clear()
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        ops.scaled_dot_product_attention(*leaves, is_causal=True).sum().backward()
        grads.append([t.grad for t in leaves])
        assert (tile.row_major(reverse=(2,)) in orders) == on
    assert all(torch.equal(a, b) for a, b in zip(*grads, strict=True))


def test_the_lse_forms_without_torch() -> None:
    """NumPy in, NumPy out: `scaled_dot_product_attention_lse` and the backward's `lse=`."""
    from fearless.ops.attention import (
        scaled_dot_product_attention_backward,
        scaled_dot_product_attention_lse,
    )

    q, k, v = (t.numpy() for t in _inputs(1, 2, 2, 24, 24, 16, "float32"))
    out, lse = scaled_dot_product_attention_lse(q, k, v, is_causal=True)
    assert isinstance(lse, np.ndarray) and lse.shape == (1, 2, 24) and lse.dtype == np.float32
    dout = np.ones_like(out)
    kept = scaled_dot_product_attention_backward(dout, q, k, v, out, True, lse=lse)
    again = scaled_dot_product_attention_backward(dout, q, k, v, out, True)
    for a, b in zip(kept, again, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(fl.KernelTypeError, match="lse"):
        scaled_dot_product_attention_backward(dout, q, k, v, out, True, lse=lse[:, :, :3])
    _, none = scaled_dot_product_attention_lse(q, k[:, :, :0], v[:, :, :0])
    assert np.isinf(none).all()


def test_backward_refuses_zero_key_heads() -> None:
    """enable_gqa with no key/value heads is a layout error, as in the forward (was a
    ZeroDivisionError from `h % hk`)."""
    from fearless.ops.attention import scaled_dot_product_attention_backward

    q, k, v = (t.numpy() for t in _inputs(1, 2, 2, 8, 8, 16, "float32"))
    k0, v0 = k[:, :0], v[:, :0]
    with pytest.raises(fl.KernelTypeError, match="2 query heads and 0 key/value heads"):
        scaled_dot_product_attention_backward(q, q, k0, v0, q, enable_gqa=True)


def test_no_head_dimension_runs_with_the_default_scale() -> None:
    """D = 0 with the scale left None: every operator's output (and the backward's gradients)
    is empty; the default 1 / sqrt(D) was a ZeroDivisionError from inside fearless
    (tests/test_ops_shape_mutations.py found it)."""
    from fearless.ops.attention import scaled_dot_product_attention_backward

    q, k = np.zeros((1, 2, 3, 0), np.float32), np.zeros((1, 1, 4, 0), np.float32)
    grads = scaled_dot_product_attention_backward(q, q, k, k, q, enable_gqa=True)
    assert [g.shape for g in grads] == [q.shape, k.shape, k.shape]
    for op in (ops.fmha, ops.gemma_attention, ops.fmha_varlen):
        assert op(q, k, k).shape == q.shape
    assert ops.swa_attention(q, k, k, 2).shape == q.shape
    assert ops.fmha_decode(q[:, :, :1], k, k, None).shape == (1, 2, 1, 0)
    assert ops.gemma_attention_decode(q[:, :, :1], k, k).shape == (1, 2, 1, 0)
    qs, ks = q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3)
    assert ops.flash_attn_func(qs, ks, ks).shape == (1, 3, 2, 0)
    assert ops.flash_attn_with_kvcache(qs, ks, ks).shape == (1, 3, 2, 0)


def test_the_torch_operator_and_its_refusal_of_a_mask_with_grad() -> None:
    """The mask's own gradient is refused; q, k, v's flow (tests/test_ops_attention_mask_backward.py)."""
    q, k, v = _inputs(1, 2, 2, 32, 32, 16, "float32")
    got = torch.ops.fearless.scaled_dot_product_attention(q, k, v, None, True)
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    assert _rel(got, want) < 1e-5
    mask = torch.ones(32, 32, dtype=torch.bool).triu()  # each query sees itself and later keys
    got = torch.ops.fearless.scaled_dot_product_attention(q, k, v, mask)
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
    assert _rel(got, want) < 1e-5
    additive = torch.zeros(32, 32, requires_grad=True)
    with pytest.raises(fl.KernelTypeError, match="no gradient for its `attn_mask`"):
        ops.scaled_dot_product_attention(q.requires_grad_(), k, v, additive)
    with torch.no_grad():
        assert ops.scaled_dot_product_attention(q, k, v, additive).shape == q.shape


@pytest.mark.parametrize(
    ("causal", "form"),
    [(False, None), (True, None), (True, (True, False, True)), (False, (False, True, False))],
)
def test_the_kernel_compiles_through_tileiras(
    cubin: Callable[..., bytes], causal: bool, form: tuple | None
) -> None:
    q = fl.zeros((2, 2, 256, 64), dtype=fl.f16)
    kv = fl.zeros((2, 1, 200, 64), dtype=fl.f16)
    out = fl.empty((2, 2, 256, 64), dtype=fl.f16).partition((1, 1, 128, 64))
    kernel = make_attention(fl.f16, causal, False, form, occupancy=2)
    mask = None
    if form is not None:
        mask_dt = fl.bool_ if form[0] else fl.f16
        mask = fl.zeros((2 if form[1] else 1, 2 if form[2] else 1, 256, 200), dtype=mask_dt)
    assert cubin(kernel, out, None, q, kv, kv, mask, 0.125, 0, 0, 1.0, 64, 2)


def test_the_two_warp_group_configuration_compiles_through_tileiras(
    cubin: Callable[..., bytes],
) -> None:
    """ATTENTION_CONFIGS' 8-worker-warp forms at the bench's head size."""
    q = fl.zeros((1, 2, 512, 128), dtype=fl.bf16)
    for tile_m in (128, 256):
        out = fl.empty(q.shape, dtype=fl.bf16).partition((1, 1, tile_m, 128))
        kernel = make_attention(fl.bf16, True, True).options(occupancy=1, num_worker_warps=8)
        assert cubin(kernel, out, None, q, q, q, None, 0.088, 0, 0, 1.0, 128, 1)


@pytest.mark.parametrize("variant", [None, (False, True, True, False)])
def test_the_forward_keeping_lse_compiles_through_tileiras(
    cubin: Callable[..., bytes], variant: tuple | None
) -> None:
    """Training's forward (keep_lse) at ATTENTION_CONFIGS' first configuration, D 128, rows
    that fill no whole tile: with a one-column lse tile tileiras 13.5 failed on it (the GPU
    tests' first call, 2026-12-05); the lse Part is (B, H, L, 1) in LSE_COLUMNS-wide tiles."""
    from fearless.ops.kernels_attention import LSE_COLUMNS

    q = fl.zeros((1, 8, 700, 128), dtype=fl.bf16)
    kv = fl.zeros((1, 2, 1300, 128), dtype=fl.bf16)
    out = fl.empty(q.shape, dtype=fl.bf16).partition((1, 1, 128, 128))
    lse = fl.empty((1, 8, 700, 1)).partition((1, 1, 128, LSE_COLUMNS))
    kernel = make_attention(fl.bf16, True, False, None, variant).options(occupancy=2)
    assert cubin(kernel, out, lse, q, kv, kv, None, 0.088, 100, 0, 1.0, 128, 4)


def test_the_delta_kernel_zeroing_dq_compiles_through_tileiras(cubin: Callable[..., bytes]) -> None:
    """The delta step's form that zeroes the atomic dQ's scratch (training at head dim 40: its
    tiles' columns past D clipped), as attention_backward launches it."""
    from fearless.backends.cubin_info import kernel_resources
    from fearless.ops.kernels_attention import LSE_COLUMNS
    from fearless.ops.kernels_attention_backward_tiles import make_attention_delta

    q = fl.zeros((1, 4, 200, 40), dtype=fl.bf16)
    delta = fl.empty((1, 4, 200, 1)).partition((1, 1, 64, LSE_COLUMNS))
    dq_acc = fl.empty((1, 4, 200, 40)).partition((1, 1, 64, 64))
    binary = cubin(make_attention_delta(fl.bf16, True), delta, dq_acc, q, q)
    assert max(r.stack for r in kernel_resources(binary)) == 0


@pytest.mark.parametrize(
    ("causal", "d"), [(True, 64), pytest.param(True, 128, marks=pytest.mark.slow),
                      pytest.param(False, 64, marks=pytest.mark.slow),
                      pytest.param(True, 256, marks=pytest.mark.slow)],  # two warp groups
)  # fmt: skip
def test_the_backward_kernels_compile_through_tileiras(
    cubin: Callable[..., bytes], causal: bool, d: int
) -> None:
    """Each kernel at its shipped configuration (tiles and occupancy, `backward_configs`), with
    keys that fill no whole tile (S = 200), spilling nothing (the cubin's stack: a spill made
    dk_dv 2.1x slower on the H100, session 18)."""
    from fearless.backends.cubin_info import kernel_resources
    from fearless.ops.kernels_attention_backward import backward_configs
    from fearless.ops.kernels_attention_backward_tiles import (
        make_attention_dkdv,
        make_attention_dq,
        make_attention_stats,
    )

    cfg = backward_configs(d)
    q = fl.zeros((1, 4, 256, d), dtype=fl.bf16)
    kv = fl.zeros((1, 2, 200, d), dtype=fl.bf16)
    stats = fl.zeros((1, 4, 256))
    no, extra = (None, None, None), (0, 0, 1.0)  # a0, a1, m absent; wl, wr, cap unread

    def made(make: Callable[..., Any], step: str) -> tuple[Any, int, int]:
        tm, tn, occupancy, warps = cfg[step]
        kernel = make(fl.bf16, causal, False).options(occupancy=occupancy, num_worker_warps=warps)
        return kernel, tm, tn

    def spills(binary: bytes) -> int:
        return max(r.stack for r in kernel_resources(binary))

    kernel, tm, tn = made(make_attention_stats, "stats")
    lse, delta = (fl.empty((1, 4, 256)).partition((1, 1, tm)) for _ in range(2))
    assert spills(cubin(kernel, lse, delta, q, kv, q, q, *no, 0.125, *extra, tn, d, 2)) == 0
    kernel, tm, tn = made(make_attention_dkdv, "dkdv")
    dk, dv = (fl.empty((1, 2, 200, d), dtype=fl.bf16).partition((1, 1, tn, d)) for _ in range(2))
    binary = cubin(kernel, dk, dv, None, q, kv, kv, q, stats, stats, *no, 0.125, *extra, tm, 2)
    assert spills(binary) == 0
    kernel, tm, tn = made(make_attention_dq, "dq")
    dq = fl.empty((1, 4, 256, d), dtype=fl.bf16).partition((1, 1, tm, d))
    assert spills(cubin(kernel, dq, q, kv, kv, q, stats, stats, *no, 0.125, *extra, tn, 2)) == 0


@pytest.mark.gpu
def test_gpu_matches_torch() -> None:
    ok, why = fl.cuda_status()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    fl.set_target("cuda")
    try:
        for b, h, hk, lq, s, d, causal, dtype in CASES:
            q, k, v = (t.cuda() for t in _inputs(b, h, hk, lq, s, d, dtype))
            gqa = hk != h
            got = ops.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
            want = F.scaled_dot_product_attention(
                q.double(), k.double(), v.double(), is_causal=causal, enable_gqa=gqa
            )
            assert _rel(got, want) < TOL[dtype], (b, h, hk, lq, s, d, causal, dtype)
        q, k, v = (t.cuda() for t in _inputs(2, 2, 2, 40, 70, 32, "float16"))
        mask = torch.rand(2, 1, 40, 70, device="cuda") > 0.3
        mask[..., 0] = True
        got = ops.scaled_dot_product_attention(q, k, v, mask)
        want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
        assert _rel(got, want) < TOL["float16"]
        for b, h, hk, s, d, dtype in DECODE_CASES:
            q, k, v = (t.cuda() for t in _inputs(b, h, hk, 1, s, d, dtype))
            got = ops.scaled_dot_product_attention(q, k, v, enable_gqa=hk != h)
            want = F.scaled_dot_product_attention(
                q.double(), k.double(), v.double(), enable_gqa=hk != h
            )
            assert _rel(got, want) < TOL[dtype], (b, h, hk, s, d, dtype)
        q, k, v = (t.cuda().requires_grad_() for t in _inputs(2, 4, 2, 64, 96, 32, "bfloat16"))
        out = ops.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        dout = torch.randn_like(out)
        out.backward(dout)
        ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
        F.scaled_dot_product_attention(*ref, is_causal=True, enable_gqa=True).backward(
            dout.double()
        )
        for got_t, want_t in zip((q, k, v), ref, strict=True):
            assert _rel(got_t.grad, want_t.grad) < 2 * TOL["bfloat16"]
    finally:
        fl.set_target(None)


def test_attention_under_torch_compile_fullgraph_forward_and_backward() -> None:
    def block(q, k, v):  # type: ignore[no-untyped-def]
        return ops.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    leaves = [t.requires_grad_() for t in _inputs(1, 4, 2, 24, 24, 16, "float32")]
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    got = compiled(*leaves)
    got.square().sum().backward()
    grads = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    want = block(*leaves)
    want.square().sum().backward()
    torch.testing.assert_close(got, want)
    for g, t in zip(grads, leaves, strict=True):
        torch.testing.assert_close(g, t.grad)


@pytest.mark.parametrize("lq,s", [(4, 0), (0, 5), (0, 0)])
def test_no_queries_or_no_keys_give_torchs_zeros_and_zero_gradients(lq: int, s: int) -> None:
    """Attention over no keys is zeros in torch, and no gradient flows where no query meets a
    key: the outputs are filled, never left as they were allocated (they read as garbage)."""
    q = torch.randn(1, 2, lq, 16, requires_grad=True)
    k, v = (torch.randn(1, 2, s, 16, requires_grad=True) for _ in range(2))
    ref = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    for _ in range(2):  # a second call gets memory the first one freed
        got = ops.scaled_dot_product_attention(q, k, v)
        want = F.scaled_dot_product_attention(*ref)
        assert got.shape == want.shape and torch.equal(got, want)
    got.sum().backward()
    want.sum().backward()
    for mine, theirs in zip((q, k, v), ref, strict=True):
        assert mine.grad is not None and theirs.grad is not None
        assert torch.equal(mine.grad, theirs.grad)
    np_out = ops.scaled_dot_product_attention(*(t.detach().numpy() for t in (q, k, v)))
    assert isinstance(np_out, np.ndarray) and not np_out.any()


@pytest.mark.parametrize("additive", [False, True])
def test_a_mask_row_that_drops_every_key_gives_zeros(additive: bool) -> None:
    """torch (2.5 and later) gives 0 for a query whose every key the mask drops; fearless gave
    NaN (exp2(-inf - -inf)) before issue 33."""
    g = np.random.default_rng(5)
    q, k, v = (g.standard_normal((1, 2, 8, 16)).astype(np.float32) for _ in range(3))
    keep = np.ones((8, 8), bool)
    keep[3, :] = False  # no key at all
    keep[5, :4] = False  # half of them
    mask = np.where(keep, 0.0, -np.inf).astype(np.float32) if additive else keep
    got = ops.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    s = q @ np.swapaxes(k, -1, -2) / 4.0
    s = np.where(keep, s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        want = np.nan_to_num((p / p.sum(-1, keepdims=True)) @ v)
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got[..., 3, :], 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
