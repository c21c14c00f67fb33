"""Issue 37 on the GPU: an op's first call for a size class runs one compile-ahead pass, in
which every step's kernels start compiling at once and nothing runs, and then gives the same
result as without it (autotune_ahead.compile_ahead_once; tests/test_autotune_ahead.py has the
simulator's side). Each test spies on the real pass: what it launched, and that the pool
had the compiles of several steps in flight together."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fearless import autotune_ahead as autotune_module
from fearless import ops
from fearless.tile import compile_ahead as ahead
from support.moe_ref import moe_backward_case

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[set[str]]:
    """The kernel names each real pass launched; a fresh compile cache and no first calls
    seen, so that this test's calls open their passes and compile."""
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune_module, "_compiled_ahead", set())
    seen: list[set[str]] = []
    real = autotune_module.compile_ahead_of

    def spy(call: Callable[[], object]) -> None:
        def counted() -> None:
            call()
            seen.append({kernel.name for kernel, _ in ahead.STATE.launches})

        real(counted)

    monkeypatch.setattr(autotune_module, "compile_ahead_of", spy)
    return seen


def _close(got: Any, want: Any, tol: float) -> None:
    """Relative to the whole tensor's norm (half-precision rounding of small entries aside)."""
    got, want = got.double(), want.double()
    assert float((got - want).norm() / want.norm().clamp_min(1e-30)) < tol


def test_attention_training_compiles_forward_and_backward_together(
    passes: list[set[str]],
) -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (
        torch.randn(1, 4, 200, 64, device="cuda", generator=g, dtype=torch.float16).requires_grad_()
        for _ in range(3)
    )
    dout = torch.randn(1, 4, 200, 64, device="cuda", generator=g, dtype=torch.float16)
    out = ops.scaled_dot_product_attention(q, k, v, is_causal=True)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    assert passes and {"attention_lse", "attention_delta", "attention_dkdv"} <= passes[0]
    qr, kr, vr = (x.detach().float().requires_grad_() for x in (q, k, v))
    want = F.scaled_dot_product_attention(qr, kr, vr, is_causal=True)
    _close(out, want, 2e-3)
    for got, ref in zip(grads, torch.autograd.grad(want, (qr, kr, vr), dout.float()), strict=True):
        _close(got, ref, 2e-2)


def test_fused_linear_cross_entropy_compiles_its_steps_together(passes: list[set[str]]) -> None:
    g = torch.Generator(device="cuda").manual_seed(1)
    h = torch.randn(300, 256, device="cuda", generator=g, dtype=torch.bfloat16).requires_grad_()
    w = torch.randn(2048, 256, device="cuda", generator=g, dtype=torch.bfloat16).requires_grad_()
    t = torch.randint(0, 2048, (300,), device="cuda", generator=g)
    loss = ops.fused_linear_cross_entropy(h, w, t, chunk_size=128)
    loss.backward()
    assert passes and {"logits", "cross_entropy"} <= passes[0]
    hr, wr = (x.detach().float().requires_grad_() for x in (h, w))
    want = F.cross_entropy(F.linear(hr, wr), t)
    want.backward()
    _close(loss, want, 2e-2)
    _close(h.grad, hr.grad, 3e-2)
    _close(w.grad, wr.grad, 3e-2)


def test_a_split_kv_decode_compiles_split_and_combine_together(
    passes: list[set[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With tuning off (as with a table's or the disk's winner): a tuning run compiles both in
    its own pass, and its decode calls then find the form seen."""
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")
    g = torch.Generator(device="cuda").manual_seed(2)
    q = torch.randn(1, 8, 1, 128, device="cuda", generator=g, dtype=torch.bfloat16)
    k, v = (
        torch.randn(1, 8, 4096, 128, device="cuda", generator=g, dtype=torch.bfloat16) for _ in "kv"
    )
    out = ops.scaled_dot_product_attention(q, k, v)
    assert any({"decode_split", "decode_combine"} <= p for p in passes), passes
    _close(out, F.scaled_dot_product_attention(q.float(), k.float(), v.float()), 2e-2)


def test_group_gemm_compiles_every_groups_gemm_together(
    passes: list[set[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One matmul per group (the path of pairs the group kernel does not take), compiled
    together."""
    from fearless.ops import functional

    monkeypatch.setattr(functional, "_in_group_launches", lambda pairs: None)
    g = torch.Generator(device="cuda").manual_seed(3)
    shapes = [(300, 256, 512), (1000, 256, 128), (64, 512, 256)]
    As = [torch.randn(m, k, device="cuda", generator=g, dtype=torch.float16) for m, k, _ in shapes]
    Bs = [torch.randn(k, n, device="cuda", generator=g, dtype=torch.float16) for _, k, n in shapes]
    got = ops.group_gemm(As, Bs)
    assert passes and "matmul" in passes[0]
    for c, a, b in zip(got, As, Bs, strict=True):
        _close(c, a.float() @ b.float(), 5e-2)


def test_fused_moe_backward_compiles_its_six_kernels_together(passes: list[set[str]]) -> None:
    """tests/gpu/test_ops_moe_gpu.py's check against autograd in float64, with the pass."""
    inputs, ids, dy, leaves = moe_backward_case(64, 256, 128, 8, 2, seed=5)
    ops.fused_moe(*inputs, ids).backward(dy)
    kernels = {"moe_act_bwd", "moe_dx", "moe_dw1", "moe_dw2", "moe_dweights"}
    assert any(kernels <= p for p in passes), passes
    for t, leaf in zip(inputs, leaves, strict=True):
        assert t.grad is not None
        assert float((t.grad.double() - leaf.grad).norm() / leaf.grad.norm()) < 2e-2
