"""Sequence-major q, k and v on the simulator: Hugging Face's and flash-attn's layout, where
(B, H, L, D) tensors are transposed views of (B, L, H, D) ones (`x.view(b, l, h, d).transpose(1,
2)`). `scaled_dot_product_attention`'s inference forward and `rope` read them in place and give
their outputs in q's layout (no copy in, none out: Hugging Face's `transpose(1, 2).contiguous()`
after attention is then free); mixed layouts, the training forward and the decode step take
heads-major copies as before. Results against torch, the outputs' strides, the fake kernels'
strides (opcheck, torch.compile) and the kernels' Tile IR through tileiras."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import fearless as fl
from fearless import config, ops, tile
from fearless.ops import _io
from fearless.ops.attention import scaled_dot_product_attention_lse
from fearless.ops.kernels_attention import make_attention
from fearless.ops.kernels_layout import make_rope
from support.attention_variants_ref import variant_attention

torch = pytest.importorskip("torch")
F = torch.nn.functional

B, H, HK, L, D = 2, 4, 2, 40, 16


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")


def _seq(*shape: int, seed: int = 0, dtype: Any = torch.float32) -> Any:
    """A (B, H, L, D) view of a random (B, L, H, D) tensor."""
    b, h, lq, d = shape
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, lq, h, d, generator=g).to(dtype).transpose(1, 2)


def _is_seq_major(x: Any) -> bool:
    return not x.is_contiguous() and x.transpose(1, 2).is_contiguous()


def test_seq_major_base_finds_transposed_views_only() -> None:
    x = _seq(B, H, L, D)
    assert _io.seq_major_base(x) is not None
    assert _io.seq_major_base(x).data_ptr() == x.data_ptr()
    assert _io.seq_major_base(x.contiguous()) is None  # dense already
    assert _io.seq_major_base(x[..., :8]) is None  # a slice: strided otherwise
    assert _io.seq_major_base(x.transpose(2, 3)) is None
    assert _io.seq_major_base(x.numpy()) is None  # not torch
    assert _io.heads_major((2, 40, 4, 16), True) == (2, 4, 40, 16)
    assert _io.heads_major((2, 4, 40, 16), False) == (2, 4, 40, 16)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("group", [1, 2])
def test_attention_reads_and_writes_sequence_major_in_place(causal: bool, group: int) -> None:
    q, k, v = _seq(B, H, L, D, seed=1), _seq(B, H // group, 56, D, seed=2), _seq(B, H // group, 56, D, seed=3)  # fmt: skip
    out = ops.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=group > 1)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=group > 1)
    assert _is_seq_major(out)  # q's layout: the caller's transpose(1, 2).contiguous() is free
    assert (out - want).abs().max() < 2e-5


def test_attention_with_a_mask_in_sequence_major() -> None:
    q, k, v = (_seq(B, H, L, D, seed=s) for s in (4, 5, 6))
    mask = torch.rand(B, 1, L, L, generator=torch.Generator().manual_seed(9)) > 0.3
    mask[..., 0] = True
    out = ops.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert _is_seq_major(out)
    assert (out - F.scaled_dot_product_attention(q, k, v, attn_mask=mask)).abs().max() < 2e-5


@pytest.mark.parametrize("which", ["q", "kv", "k"])
def test_mixed_layouts(which: str) -> None:
    """Only q sequence-major (its layout goes to the output), only k and v (read in place, q
    and the output dense), only k (v dense: both copied dense, as before)."""
    seq = [_seq(B, H, L, D, seed=s) for s in (7, 8, 9)]
    q, k, v = (x if name in which else x.contiguous() for name, x in zip("qkv", seq, strict=True))
    out = ops.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert _is_seq_major(out) == (which == "q")
    assert (out - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max() < 2e-5


@pytest.mark.parametrize(
    "name,kw,ref",
    [
        ("fmha", {}, {}),
        ("swa_attention", {"window_size": 9}, {"left": 8}),
        ("gemma_attention", {"window_size": 7, "soft_cap": 5.0}, {"left": 7, "cap": 5.0}),
    ],
)
@pytest.mark.parametrize("lq", [L, 24])
def test_tilegym_variants_read_sequence_major_in_place(
    name: str, kw: dict[str, Any], ref: dict[str, Any], lq: int
) -> None:
    """fmha, swa_attention and gemma_attention (bottom-right diagonal where L != S, window,
    soft cap) over sequence-major q, k and v: in place, the output in q's layout."""
    q, k, v = _seq(B, H, lq, D, seed=21), _seq(B, HK, L, D, seed=22), _seq(B, HK, L, D, seed=23)
    out = getattr(ops, name)(q, k, v, **kw)
    assert _is_seq_major(out)
    want = variant_attention(q, k, v, causal=True, **ref)
    assert (out.double() - want).abs().max() < 2e-5


def test_decode_and_training_forward_take_dense_copies() -> None:
    """A decode step (one query) and the training forward (kept lse, heads-major) with
    sequence-major k and v: right results, dense outputs."""
    q = torch.randn(B, H, 1, D)
    k, v = _seq(B, H, 70, D, seed=10), _seq(B, H, 70, D, seed=11)
    out = ops.scaled_dot_product_attention(q, k, v)
    assert (out - F.scaled_dot_product_attention(q, k, v)).abs().max() < 2e-5
    q, k, v = (_seq(B, H, L, D, seed=s) for s in (12, 13, 14))
    out, lse = scaled_dot_product_attention_lse(q, k, v, is_causal=True)
    assert out.is_contiguous() and lse.shape == (B, H, L)
    assert (out - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max() < 2e-5


def test_attention_autograd_with_sequence_major_leaves() -> None:
    """Training through torch.ops.fearless from sequence-major views of leaves: gradients as
    torch's."""
    base = [torch.randn(B, L, H, D, generator=torch.Generator().manual_seed(s)) for s in (1, 2, 3)]
    leaves = [t.requires_grad_() for t in base]
    q, k, v = (t.transpose(1, 2) for t in leaves)
    ops.scaled_dot_product_attention(q, k, v, is_causal=True).square().sum().backward()
    ref = [t.detach().clone().requires_grad_() for t in base]
    rq, rk, rv = (t.transpose(1, 2) for t in ref)
    F.scaled_dot_product_attention(rq, rk, rv, is_causal=True).square().sum().backward()
    for got, want in zip(leaves, ref, strict=True):
        assert (got.grad - want.grad).abs().max() < 1e-4


def _rotate(x: Any, cos: Any, sin: Any) -> Any:
    """Hugging Face's rotation (rotate_half) of x (B, H, S, D) by tables (1, S, D)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos.unsqueeze(1) + torch.cat((-x2, x1), dim=-1) * sin.unsqueeze(1)


def _tables(s: int, d: int) -> tuple[Any, Any]:
    angles = torch.rand(1, s, d // 2, generator=torch.Generator().manual_seed(3)) * 6
    angles = torch.cat((angles, angles), -1)
    return angles.cos(), angles.sin()


@pytest.mark.parametrize("k_seq", [True, False])
def test_rope_sequence_major(k_seq: bool) -> None:
    """q and k both sequence-major: rotated in place of a copy, outputs sequence-major;
    k dense: both dense, as before."""
    q = _seq(B, H, L, D, seed=1)
    k = _seq(B, HK, L, D, seed=2) if k_seq else _seq(B, HK, L, D, seed=2).contiguous()
    cos, sin = _tables(L, D)
    qr, kr = ops.rope(q, k, cos, sin)
    assert _is_seq_major(qr) == _is_seq_major(kr) == k_seq
    assert (qr - _rotate(q, cos, sin)).abs().max() < 1e-5
    assert (kr - _rotate(k, cos, sin)).abs().max() < 1e-5


def test_rope_with_one_kv_head_beside_a_sequence_major_q() -> None:
    """A multi-query model's k, (B, 1, S, D), is dense in both layouts: beside a
    sequence-major q it is read as (B, S, 1, D), so q is read in place too; alone, or beside a
    dense q, everything stays dense (no view, no lost replay)."""
    q, k = _seq(B, H, L, D, seed=6), _seq(B, 1, L, D, seed=7)
    assert k.is_contiguous() and _io.seq_major_base(k) is None
    assert _io.seq_major_bases(q, k) is not None and _io.seq_major_bases(k) is None
    assert _io.seq_major_bases(q.contiguous(), k) is None
    cos, sin = _tables(L, D)
    qr, kr = ops.rope(q, k, cos, sin)
    assert _is_seq_major(qr)
    assert (qr - _rotate(q, cos, sin)).abs().max() < 1e-5
    assert (kr - _rotate(k, cos, sin)).abs().max() < 1e-5
    torch.library.opcheck(torch.ops.fearless.rope.default, (q, k, cos, sin))


def test_rope_in_bf16_with_f32_tables_sequence_major() -> None:
    """The wide form (f32 tables, 16-bit q and k: OLMo's) in the sequence-major layout."""
    q, k = _seq(B, H, L, D, seed=4, dtype=torch.bfloat16), _seq(B, HK, L, D, seed=5, dtype=torch.bfloat16)  # fmt: skip
    cos, sin = _tables(L, D)
    qr, kr = ops.rope(q, k, cos, sin)
    assert _is_seq_major(qr) and _is_seq_major(kr)
    want = _rotate(q.float(), cos, sin).to(torch.bfloat16)
    assert (qr.float() - want.float()).abs().max() < 2e-2


def test_fake_kernels_give_the_real_strides() -> None:
    """torch's checker of custom ops (fake kernel against the real one, strides included)
    with sequence-major operands, and torch.compile's graph of both."""
    q, k, v = (_seq(B, H, L, D, seed=s) for s in (1, 2, 3))
    sdpa = torch.ops.fearless.scaled_dot_product_attention.default
    torch.library.opcheck(sdpa, (q, k, v, None, True, None, False))
    torch.library.opcheck(sdpa, (q, k.contiguous(), v, None, False, None, False))
    cos, sin = _tables(L, D)
    torch.library.opcheck(torch.ops.fearless.rope.default, (q, k, cos, sin))
    torch.library.opcheck(torch.ops.fearless.fmha.default, (q, k, v, None, True))
    torch.library.opcheck(torch.ops.fearless.swa_attention.default, (q, k, v, 9, None, True))
    decode_q = torch.randn(B, H, 1, D)  # a decode step: dense whatever k and v are
    torch.library.opcheck(sdpa, (decode_q, k, v, None, False, None, False))

    def layer(qp: Any, kp: Any, vp: Any) -> Any:
        qr, kr = torch.ops.fearless.rope(qp.transpose(1, 2), kp.transpose(1, 2), cos, sin)
        out = torch.ops.fearless.scaled_dot_product_attention(
            qr, kr, vp.transpose(1, 2), None, True
        )
        return out.transpose(1, 2).reshape(B, L, H * D)

    bases = [x.transpose(1, 2) for x in (q, k, v)]
    got = torch.compile(layer, fullgraph=True, backend="aot_eager")(*bases)
    qr, kr = _rotate(q, cos, sin), _rotate(k, cos, sin)
    want = (
        F.scaled_dot_product_attention(qr, kr, v, is_causal=True).transpose(1, 2).reshape(B, L, -1)
    )
    assert (got - want).abs().max() < 2e-5


@pytest.mark.parametrize(
    "layout,variant",
    [((True, True), None), ((True, False), (True, True, False, True)), ((False, True), None)],
)
def test_the_sequence_major_kernels_compile_through_tileiras(
    cubin: Callable[..., bytes], layout: tuple[bool, bool], variant: Any
) -> None:
    """The plain kernel and a variant's (bottom-right, left window, soft cap: gemma_attention's
    causal form) in each layout."""
    q_seq, kv_seq = layout
    q = fl.zeros(_io.heads_major((2, 8, 256, 128), q_seq), dtype=fl.bf16)
    kv = fl.zeros(_io.heads_major((2, 2, 256, 128), kv_seq), dtype=fl.bf16)
    tile_m = _io.heads_major((1, 1, 128, 128), q_seq)
    out = fl.empty(q.shape, dtype=fl.bf16).partition(tile_m, tile.row_major())
    kernel = make_attention(fl.bf16, True, True, None, variant, layout, occupancy=2)
    assert cubin(kernel, out, None, q, kv, kv, None, 0.125, 64, 0, 30.0, 128, 4)


@pytest.mark.parametrize("hk", [8, 1])
def test_the_sequence_major_rope_compiles_through_tileiras(
    cubin: Callable[..., bytes], hk: int
) -> None:
    q, k = fl.zeros((2, 64, 32, 128), dtype=fl.bf16), fl.zeros((2, 64, hk, 128), dtype=fl.bf16)
    cos = fl.zeros((1, 64, 128), dtype=fl.bf16)
    qo = fl.empty(q.shape, dtype=fl.bf16).partition((1, 1, 32, 128))
    ko = fl.empty(k.shape, dtype=fl.bf16).partition((1, 1, hk, 128))
    assert cubin(make_rope(fl.bf16, False, None, True), qo, ko, q, k, cos, cos, 1)
