"""`fearless.ops.scaled_dot_product_attention`'s backward with an `attn_mask` (bool or additive)
on the simulator: gradients against torch autograd of a float64 reference for masks broadcast
over batch and heads or not, with grouped-query heads, with causal, f32 tight and bf16 loose;
a padding mask whose padded queries see no key (zero gradients, as their output is 0); the
refusal of a mask that requires grad; torch.compile and opcheck; the masked kernels through
tileiras."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import fearless as fl
from fearless import ops
from support.attention_mask_ref import masked_attention

torch = pytest.importorskip("torch")
F = torch.nn.functional

B, H, HK, L, S, D = 2, 4, 2, 40, 70, 16
TOL = {"float32": 2e-5, "bfloat16": 2e-2}


def _qkv(dtype: str = "float32", lq: int = L, s: int = S) -> tuple[Any, Any, Any]:
    g = torch.Generator().manual_seed(lq * 1000 + s)
    make = lambda *shape: torch.randn(*shape, generator=g).to(getattr(torch, dtype))  # noqa: E731
    return make(B, H, lq, D), make(B, HK, s, D), make(B, HK, s, D)


def _mask(shape: tuple, kind: str, dtype: str = "float32") -> Any:
    g = torch.Generator().manual_seed(7)
    if kind == "bool":
        mask = torch.rand(*shape, generator=g) > 0.4
        mask[..., 0] = True  # every query keeps a key (the padding test drops them all)
        return mask
    return torch.randn(*shape, generator=g).to(getattr(torch, dtype))


def _rel(got: Any, want: Any) -> float:
    return float((got.detach().double() - want).norm() / want.norm())


def _check_grads(q: Any, k: Any, v: Any, mask: Any, causal: bool, tol: float) -> list[Any]:
    """Forward and backward through fearless and the f64 reference; their gradients' relative
    errors under `tol`; fearless's gradients returned."""
    lq, lk, lv = leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = ops.scaled_dot_product_attention(lq, lk, lv, mask, causal, enable_gqa=True)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(out.dtype)
    out.backward(dout)
    rq, rk, rv = ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    want = masked_attention(rq, rk, rv, mask, causal)
    want.backward(dout.double())
    assert _rel(out, want.detach()) < tol
    for got, theirs in zip(leaves, ref, strict=True):
        assert got.grad is not None and theirs.grad is not None
        assert got.grad.dtype == got.dtype and _rel(got.grad, theirs.grad) < tol
    return [t.grad for t in leaves]


CASES = [  # (mask shape, kind, causal, dtype)
    ((1, 1, L, S), "bool", False, "float32"),
    ((B, 1, L, S), "float", False, "float32"),
    ((B, H, L, S), "bool", True, "float32"),  # causal and a mask: both apply
    ((L, S), "float", True, "bfloat16"),
    pytest.param((1, H, L, S), "float", False, "float32", marks=pytest.mark.slow),
    pytest.param((B, H, L, S), "bool", False, "bfloat16", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("shape", "kind", "causal", "dtype"), CASES)
def test_gradients_match_a_float64_reference(
    shape: tuple, kind: str, causal: bool, dtype: str
) -> None:
    q, k, v = _qkv(dtype)
    _check_grads(q, k, v, _mask(shape, kind, dtype), causal, TOL[dtype])


def test_the_reference_is_torchs_sdpa() -> None:
    """The reference (tests/support/attention_mask_ref.py) is torch's SDPA (f64, CPU) where every
    row keeps a key."""
    q, k, v = (t.double() for t in _qkv())
    for mask in (_mask((B, 1, L, S), "bool"), _mask((1, H, L, S), "float").double()):
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        torch.testing.assert_close(masked_attention(q, k, v, mask, False), want)


@pytest.mark.parametrize("additive", [False, True])
def test_a_padding_mask_gives_the_padded_queries_zero_gradients(additive: bool) -> None:
    """Hugging Face's left padding: batch row 1's first 5 keys are padding, and its first 5
    queries see no key at all (their output is 0): their dQ is 0, nothing flows through them,
    and every gradient is finite."""
    q, k, v = _qkv("float32", 48, 48)
    keep = torch.ones(48, 48, dtype=torch.bool).tril().repeat(B, 1, 1, 1)
    keep[1, :, :, :5] = False
    mask = torch.where(keep, 0.0, float("-inf")) if additive else keep
    dq, dk, dv = _check_grads(q, k, v, mask, False, TOL["float32"])
    assert all(bool(g.isfinite().all()) for g in (dq, dk, dv))
    assert not dq[1, :, :5].any() and not dk[1, :, :5].any() and not dv[1, :, :5].any()


def test_a_mask_that_requires_grad_is_refused_at_the_call() -> None:
    q, k, v = (t.requires_grad_() for t in _qkv())
    mask = _mask((1, 1, L, S), "float").requires_grad_()
    with pytest.raises(fl.KernelTypeError, match="no gradient for its `attn_mask`"):
        ops.scaled_dot_product_attention(q, k, v, mask, enable_gqa=True)
    out = ops.scaled_dot_product_attention(q, k, v, mask.detach(), enable_gqa=True)
    assert out.requires_grad
    with torch.no_grad():  # no autograd: the mask's requires_grad does not matter
        assert ops.scaled_dot_product_attention(q, k, v, mask, enable_gqa=True).shape == q.shape


def test_torch_compile_forward_and_backward_with_a_mask() -> None:
    mask = _mask((B, 1, 24, 24), "bool")

    def block(q: Any, k: Any, v: Any) -> Any:
        return ops.scaled_dot_product_attention(q, k, v, mask, enable_gqa=True).square().sum()

    q, k, v = leaves = [t.requires_grad_() for t in _qkv("float32", 24, 24)]
    torch.compile(block, fullgraph=True, backend="aot_eager")(q, k, v).backward()
    rq, rk, rv = ref = [t.detach().double().requires_grad_() for t in leaves]
    masked_attention(rq, rk, rv, mask, False).square().sum().backward()
    for got, want in zip(leaves, ref, strict=True):
        assert _rel(got.grad, want.grad) < 4e-5


def test_torch_library_opcheck_with_a_mask() -> None:
    """torch's checker of custom ops: schema, fake kernel, autograd registration (the mask's
    gradient None) and AOT dispatch, forward and backward."""
    q, k, v = (t.requires_grad_() for t in _qkv("float32", 10, 13))
    mask = _mask((1, 1, 10, 13), "float")
    sdpa = torch.ops.fearless.scaled_dot_product_attention.default
    torch.library.opcheck(sdpa, (q, k, v, mask, False, None, True))
    back = torch.ops.fearless.scaled_dot_product_attention_backward.default
    dout, out = torch.randn(q.shape), torch.randn(q.shape)
    args = (dout, *(t.detach() for t in (q, k, v)), out, False, None, True, mask > 0)
    torch.library.opcheck(back, args)
    # training's forward (out and the kept lse) and the backward that takes that lse
    train = torch.ops.fearless.scaled_dot_product_attention_lse.default
    torch.library.opcheck(train, (q, k, v, mask, True, None, True))
    out, lse = train(*(t.detach() for t in (q, k, v)), mask, True, None, True)
    args = (dout, *(t.detach() for t in (q, k, v)), out, True, None, True, mask, lse)
    torch.library.opcheck(back, args)


def _masked_launches(form: tuple) -> list[tuple[Any, tuple]]:
    """The three masked kernels' factories and arguments, bf16 at 64 x 64 tiles."""
    from fearless.ops import kernels_attention_backward as KB

    q = fl.zeros((2, 4, 256, 64), dtype=fl.bf16)
    kv = fl.zeros((2, 2, 200, 64), dtype=fl.bf16)
    m = fl.zeros((2 if form[1] else 1, 4 if form[2] else 1, 256, 200), dtype=fl.bool_)
    if not form[0]:
        m = fl.zeros(m.shape, dtype=fl.bf16)
    stats = fl.zeros((2, 4, 256))
    lse, delta = (fl.empty((2, 4, 256)).partition((1, 1, 64)) for _ in range(2))
    dk, dv = (fl.empty((2, 2, 200, 64), dtype=fl.bf16).partition((1, 1, 64, 64)) for _ in "kv")
    dq = fl.empty((2, 4, 256, 64), dtype=fl.bf16).partition((1, 1, 64, 64))
    no, extra = (None, None), (0, 0, 1.0)  # no ragged inputs; the variant's scalars, unread
    return [
        (KB.make_attention_stats, (lse, delta, q, kv, q, q, *no, m, 0.125, *extra, 64, 64, 2)),
        (
            KB.make_attention_dkdv,
            (dk, dv, None, q, kv, kv, q, stats, stats, *no, m, 0.125, *extra, 64, 2),
        ),
        (KB.make_attention_dq, (dq, q, kv, kv, q, stats, stats, *no, m, 0.125, *extra, 64, 2)),
    ]


FORMS = [  # (causal, (is_bool, batch, heads), which kernels): one kernel compiles in the quick
    # run (tileiras takes seconds per kernel), the other kernels and forms are slow
    (True, (True, True, False), ("make_attention_dkdv",)),
    pytest.param(
        True,
        (True, True, False),
        ("make_attention_stats", "make_attention_dq"),
        marks=pytest.mark.slow,
    ),
    pytest.param(False, (False, False, True), None, marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("causal", "form", "which"), FORMS)
def test_the_masked_backward_kernels_compile_through_tileiras(
    cubin: Callable[..., bytes], causal: bool, form: tuple, which: tuple | None
) -> None:
    for make, args in _masked_launches(form):
        if which is None or make.__name__ in which:
            assert cubin(make(fl.bf16, causal, False, None, form), *args), make.__name__
