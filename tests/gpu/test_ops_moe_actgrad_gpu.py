"""`fearless.ops.moe_actgrad_bwd` on the GPU: a routing made as SonicMoE's (the (token, k) slots
sorted by expert: x_gather_idx = slot // top_k, s_scatter_idx = slot, the offsets the counts'
prefix sum; some experts get no token), every activation, bf16 / f16 / f32, against the float64
NumPy reference of tests/support/moe_actgrad_ref.py; ds added to; a bad index refused from
CUDA tensors (the host check reads them back)."""

from __future__ import annotations

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from support.moe_actgrad_ref import GLU, moe_actgrad_reference

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]

KINDS = ("swiglu", "geglu", "reglu", "silu", "relu", "gelu", "relu_sq")


def _args(kind, tokens, topk, hidden, inter, experts, dtype, seed=0):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, max(1, experts - 2), (tokens, topk), generator=g)  # 2 idle experts
    slots = torch.argsort(ids.reshape(-1), stable=True)
    counts = torch.bincount(ids.reshape(-1), minlength=experts)
    tk, width = tokens * topk, 2 * inter if kind in GLU else inter
    dt = getattr(torch, dtype)

    def cuda(t):  # type: ignore[no-untyped-def]
        return t.to("cuda")

    return dict(
        dout=cuda(torch.randn(tokens, hidden, generator=g).to(dt)),
        h=cuda(torch.randn(tk, width, generator=g).to(dt)),
        w2=cuda((torch.randn(experts, inter, hidden, generator=g) * hidden**-0.5).to(dt)),
        dh=torch.empty(tk, width, dtype=dt, device="cuda"),
        ds=torch.zeros(tk, device="cuda"),
        b2=None,
        db2=None,
        a_prime=torch.empty(tk, inter, dtype=dt, device="cuda"),
        topk_scores=cuda(torch.softmax(torch.randn(tokens, topk, generator=g), -1).reshape(-1)),
        expert_frequency_offset=cuda(torch.cat([torch.zeros(1), counts.cumsum(0)]).int()),
        x_gather_idx=cuda((slots // topk).int()),
        s_scatter_idx=cuda(slots.int()),
        activation_type=kind,
    )


def _check(a, rel_tol):  # type: ignore[no-untyped-def]
    names = ("dout", "h", "w2", "topk_scores", "expert_frequency_offset", "x_gather_idx",
             "s_scatter_idx")  # fmt: skip
    host = [a[n].cpu() for n in names]
    want = moe_actgrad_reference(
        *((t.double() if t.is_floating_point() else t).numpy() for t in host),
        a["activation_type"],
    )
    for name, w in zip(("dh", "a_prime", "ds"), want, strict=True):
        got = a[name].double().cpu().numpy()
        rel = float(np.linalg.norm(got - w)) / max(float(np.linalg.norm(w)), 1e-30)
        assert rel < rel_tol, (name, rel)


@pytest.mark.parametrize("kind", KINDS)
def test_every_activation_bf16(kind: str) -> None:
    a = _args(kind, 256, 4, 1024, 512, 16, "bfloat16")
    ops.moe_actgrad_bwd(**a)
    _check(a, 2e-2)


@pytest.mark.parametrize(
    "tokens,topk,hidden,inter,experts,dtype",
    [
        (16, 2, 512, 256, 8, "bfloat16"),
        (300, 2, 256, 200, 8, "float16"),  # I not a power of two
        (64, 8, 1024, 512, 64, "bfloat16"),  # many experts, most groups under a row tile
        (128, 2, 384, 96, 4, "float32"),
    ],
)
def test_shapes_and_dtypes(tokens, topk, hidden, inter, experts, dtype) -> None:  # type: ignore[no-untyped-def]
    a = _args("swiglu", tokens, topk, hidden, inter, experts, dtype, seed=1)
    ops.moe_actgrad_bwd(**a, max_tokens_per_expert=tokens * topk)
    _check(a, 1e-4 if dtype == "float32" else 2e-2)


def test_ds_adds_and_a_bad_index_is_refused() -> None:
    a = _args("gelu", 64, 2, 512, 256, 8, "bfloat16", seed=2)
    ops.moe_actgrad_bwd(**a)
    first = a["ds"].clone()
    ops.moe_actgrad_bwd(**a)
    torch.testing.assert_close(a["ds"], 2 * first, rtol=1e-5, atol=1e-5)  # deterministic
    bad = a["x_gather_idx"].clone()
    bad[5] = 64
    with pytest.raises(fl.KernelIndexError, match=r"`x_gather_idx\[5\]` .* is 64, outside"):
        ops.moe_actgrad_bwd(**{**a, "x_gather_idx": bad})
