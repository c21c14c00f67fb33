"""Sequence-major q, k and v on the GPU (tests/test_ops_sequence_major.py has the simulator's
side): a Llama prefill's shapes (32 query heads on 8 KV heads, D 128, bf16), q, k and v as
Hugging Face hands them to rope and attention (transposed views of the projections), against
torch's SDPA and rotation; the outputs in q's layout; ragged lengths, GQA and MHA, f16; mixed
layouts; TileGym's fmha, swa_attention and gemma_attention; the same layer through
torch.compile."""

from __future__ import annotations

from typing import Any

import pytest

from fearless import ops

torch = pytest.importorskip("torch")
F = torch.nn.functional
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _seq(b: int, h: int, length: int, d: int, dtype: Any = torch.bfloat16) -> Any:
    return torch.randn(b, length, h, d, device="cuda", dtype=dtype).transpose(1, 2)


def _is_seq_major(x: Any) -> bool:
    return not x.is_contiguous() and x.transpose(1, 2).is_contiguous()


def _rel(got: Any, want: Any) -> float:
    return float((got.float() - want.float()).norm() / want.float().norm())


@pytest.mark.parametrize(
    "b,h,hk,length,causal,dtype",
    [
        (2, 32, 8, 2048, True, torch.bfloat16),
        (1, 32, 8, 1000, True, torch.bfloat16),
        (2, 16, 16, 777, False, torch.float16),
        (3, 8, 2, 128, True, torch.bfloat16),
    ],
)
def test_attention_in_sequence_major(
    b: int, h: int, hk: int, length: int, causal: bool, dtype: Any
) -> None:
    q, k, v = _seq(b, h, length, 128, dtype), _seq(b, hk, length, 128, dtype), _seq(b, hk, length, 128, dtype)  # fmt: skip
    with torch.no_grad():
        out = ops.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hk != h)
        want = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hk != h)
    assert out.is_cuda and _is_seq_major(out)
    assert _rel(out, want) < 1e-2


@pytest.mark.parametrize("which", ["q", "kv"])
def test_mixed_layouts_and_one_kv_head(which: str) -> None:
    """Only q sequence-major, or only k and v (the mixed kernels), and one KV head (a (B, 1, S,
    D) view is dense to torch: q alone is read in place, as in a multi-query model)."""
    b, h, length = 2, 16, 600
    for hk in (1, 4):
        q, k, v = _seq(b, h, length, 128), _seq(b, hk, length, 128), _seq(b, hk, length, 128)
        if which == "q":
            k, v = k.contiguous(), v.contiguous()
        else:
            q = q.contiguous()
        with torch.no_grad():
            out = ops.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            want = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        assert _is_seq_major(out) == (which == "q")
        assert _rel(out, want) < 1e-2, (which, hk)


@pytest.mark.parametrize(
    "name,kw",
    [
        ("fmha", {}),
        ("swa_attention", {"window_size": 256}),
        ("gemma_attention", {"window_size": 255, "soft_cap": 50.0}),
    ],
)
@pytest.mark.parametrize("lq", [1024, 333])
def test_tilegym_variants_in_sequence_major(name: str, kw: dict[str, Any], lq: int) -> None:
    """fmha, swa_attention and gemma_attention over sequence-major views (bottom-right where
    L != S): the same result as the heads-major call, in q's layout."""
    q, k, v = _seq(2, 16, lq, 128), _seq(2, 8, 1024, 128), _seq(2, 8, 1024, 128)
    op = getattr(ops, name)
    with torch.no_grad():
        out = op(q, k, v, **kw)
        want = op(q.contiguous(), k.contiguous(), v.contiguous(), **kw)
    assert _is_seq_major(out) and want.is_contiguous()
    assert _rel(out, want) < 1e-3


def test_a_llama_layer_reads_its_projections_in_place() -> None:
    """rope then attention on the projections' views, eagerly and through torch.compile: the
    output's transpose(1, 2) is dense (Hugging Face's .contiguous() copies nothing)."""
    b, length, h, hk, d = 2, 1024, 32, 8, 128
    qp = torch.randn(b, length, h * d, device="cuda", dtype=torch.bfloat16)
    kp = torch.randn(b, length, hk * d, device="cuda", dtype=torch.bfloat16)
    vp = torch.randn(b, length, hk * d, device="cuda", dtype=torch.bfloat16)
    angles = torch.rand(1, length, d // 2, device="cuda") * 6
    angles = torch.cat((angles, angles), -1)
    cos, sin = angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16)

    def layer(qp: Any, kp: Any, vp: Any) -> Any:
        q = qp.view(b, length, h, d).transpose(1, 2)
        k = kp.view(b, length, hk, d).transpose(1, 2)
        v = vp.view(b, length, hk, d).transpose(1, 2)
        qr, kr = ops.rope(q, k, cos, sin)
        out = ops.scaled_dot_product_attention(qr, kr, v, is_causal=True, enable_gqa=True)
        return out.transpose(1, 2)

    def reference(qp: Any, kp: Any, vp: Any) -> Any:
        q = qp.view(b, length, h, d).transpose(1, 2)
        k = kp.view(b, length, hk, d).transpose(1, 2)
        v = vp.view(b, length, hk, d).transpose(1, 2)
        rot = lambda x: torch.cat((-x[..., d // 2 :], x[..., : d // 2]), -1)  # noqa: E731
        qr, kr = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        return F.scaled_dot_product_attention(qr, kr, v, is_causal=True, enable_gqa=True).transpose(1, 2)  # fmt: skip

    with torch.no_grad():
        want = reference(qp, kp, vp)
        got = layer(qp, kp, vp)
        assert got.is_contiguous() and _rel(got, want) < 2e-2
        compiled = torch.compile(layer, fullgraph=True)(qp, kp, vp)
        assert compiled.is_contiguous() and _rel(compiled, want) < 2e-2
