"""fearless.ops.rope with f32 cos and sin and f16 or bf16 q and k (OLMo 2's and OLMo 3's
tables), on the simulator: rotated in f32 and rounded once to q's dtype, bit for bit Hugging
Face's `(q * cos + rotate_half(q) * sin).to(q.dtype)`; its backward rotates the other way the
same; 16-bit tables with f32 q and k widen exactly; tables of the other 16-bit dtype, or cos
and sin of two dtypes, are refused with E0701."""

from __future__ import annotations

from typing import Any

import pytest

import fearless as fl
from fearless import config, ops

torch = pytest.importorskip("torch")

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")


def _rotate_half(x: Any) -> Any:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


def _hugging_face(q: Any, k: Any, cos: Any, sin: Any) -> tuple[Any, Any]:
    """modeling_olmo3.apply_rotary_pos_emb: the products promote q to f32, one cast back."""
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return tuple((x * c + _rotate_half(x) * s).to(x.dtype) for x in (q, k))  # type: ignore[return-value]


def _inputs(dtype: Any, cos_batch: int = 1) -> tuple[Any, Any, Any, Any]:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 8, 16, generator=g).to(dtype)
    k = torch.randn(2, 2, 8, 16, generator=g).to(dtype)
    ang = torch.randn(cos_batch, 8, 8, generator=g) * 4
    cos, sin = (torch.cat((t, t), -1) for t in (ang.cos(), ang.sin()))
    return q, k, cos, sin


@pytest.mark.parametrize("dtype", [bf16, f16])
@pytest.mark.parametrize("cos_batch", [0, 1, 2])
def test_f32_tables_rotate_16_bit_q_and_k_as_hugging_face(dtype: Any, cos_batch: int) -> None:
    q, k, cos, sin = _inputs(dtype, cos_batch or 1)
    want = _hugging_face(q, k, cos, sin)
    tables = (cos[0], sin[0]) if cos_batch == 0 else (cos, sin)  # (S, D) or (1 or B, S, D)
    got = ops.rope(q, k, *tables)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == dtype
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    # and within one rounding of the float64 rotation
    c, s = cos.double().unsqueeze(1), sin.double().unsqueeze(1)
    for g, x in zip(got, (q, k), strict=True):
        exact = x.double() * c + _rotate_half(x.double()) * s
        torch.testing.assert_close(g.double(), exact, rtol=2.0**-7, atol=1e-6)


def test_f32_tables_with_bf16_fl_tensors() -> None:
    q, k, cos, sin = _inputs(bf16)
    qa, ka = (fl.asarray(x.float().numpy(), dtype=fl.bf16) for x in (q, k))
    got = ops.rope(qa, ka, cos.numpy(), sin.numpy())
    for g, w in zip(got, _hugging_face(q, k, cos, sin), strict=True):
        assert g.dtype == fl.bf16
        torch.testing.assert_close(torch.from_numpy(g.numpy().astype("float32")), w.float())


def test_gradients_of_bf16_q_and_k_by_f32_tables() -> None:
    """The backward is the inverse rotation computed in f32 and rounded once (Hugging Face's
    autograd rounds each of its two paths to bf16 before summing them: within bf16's tolerance
    of ours)."""
    q, k, cos, sin = _inputs(bf16)
    q.requires_grad_()
    k.requires_grad_()
    qr, kr = (t.detach().clone().requires_grad_() for t in (q, k))
    got, want = ops.rope(q, k, cos, sin), _hugging_face(qr, kr, cos, sin)
    g = torch.Generator().manual_seed(1)
    dq, dk = (torch.randn(t.shape, generator=g).to(bf16) for t in (q, k))
    torch.autograd.backward(got, (dq, dk))
    torch.autograd.backward(want, (dq, dk))
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    for x, xr, dy in ((q, qr, dq), (k, kr, dk)):
        assert x.grad is not None and x.grad.dtype == bf16
        h = dy.shape[-1] // 2
        d1, d2 = dy[..., :h].float(), dy[..., h:].float()
        c1, s1 = c[..., :h], s[..., :h]
        inverse = torch.cat((d1 * c1 + d2 * s1, d2 * c1 - d1 * s1), -1).to(bf16)
        torch.testing.assert_close(x.grad, inverse, rtol=0, atol=0)
        torch.testing.assert_close(x.grad, xr.grad, rtol=1e-2, atol=2e-2)


def test_16_bit_tables_with_f32_q_widen_exactly() -> None:
    q, k, cos, sin = _inputs(f32)
    cos, sin = cos.to(bf16), sin.to(bf16)
    got = ops.rope(q, k, cos, sin)
    want = ops.rope(q, k, cos.to(f32), sin.to(f32))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("q_dtype", "cos_dtype", "sin_dtype", "tables"),
    [
        (f16, bf16, bf16, "bf16"),  # another 16-bit dtype
        (bf16, f32, bf16, "f32 and bf16"),  # cos and sin of two dtypes
    ],
)
def test_tables_that_would_round_silently_are_refused(
    q_dtype: Any, cos_dtype: Any, sin_dtype: Any, tables: str
) -> None:
    q, k, cos, sin = _inputs(q_dtype)
    with pytest.raises(fl.KernelTypeError, match="rope takes both tables in q's dtype") as info:
        ops.rope(q, k, cos.to(cos_dtype), sin.to(sin_dtype))
    e = info.value
    assert e.code == "E0701" and e.loc is not None and e.loc.file == __file__
    name = {f32: "f32", f16: "f16", bf16: "bf16"}[q_dtype]
    assert f"are {tables} with {name} q and k" in str(e)
    assert e.help == f"convert cos and sin to {name} first"
