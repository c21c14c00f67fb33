"""`fearless.ops.fused_moe`'s backward (`fused_moe_backward`, through torch autograd): the
gradients of hidden_states, w1, w2 and topk_weights against torch autograd of a float64
reference (tests/support/moe_ref.py) on the simulator, at tiny ragged shapes (experts with no
slot, top_k 1 and 2, a row naming one expert twice, experts over several sorted blocks, f32 /
f16 / bf16); the torch operator's fake kernel; its refusals; the new kernels through
tileiras."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_moe_backward import (
    make_moe_act_bwd,
    make_moe_dw1,
    make_moe_dw2,
    make_moe_dweights,
    make_moe_dx,
)
from fearless.ops.moe import _fused_moe_backward, fused_moe_backward
from support.moe_ref import fused_moe_reference, fused_moe_torch_reference

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 4e-2}


def _inputs(tokens, hidden, inter, experts, topk, dtype, seed=0):  # type: ignore[no-untyped-def]
    """Tensors of `dtype`; expert experts - 1 gets no slot; row 0 names expert 0 top_k times."""
    g = torch.Generator().manual_seed(seed + tokens * 100 + experts)
    dt = getattr(torch, dtype)
    x = (torch.randn(tokens, hidden, generator=g) * 0.5).to(dt)
    w1 = (torch.randn(experts, 2 * inter, hidden, generator=g) * 0.1).to(dt)
    w2 = (torch.randn(experts, hidden, inter, generator=g) * 0.1).to(dt)
    weights = torch.softmax(torch.randn(tokens, topk, generator=g), -1).to(dt)
    ids = torch.randint(0, experts - 1, (tokens, topk), generator=g)
    ids[0] = 0
    dy = torch.randn(tokens, hidden, generator=g).to(dt)
    return x, w1, w2, weights, ids, dy


def _check(got, leaves, dtype: str) -> None:  # type: ignore[no-untyped-def]
    for name, g, leaf in zip(("dx", "dw1", "dw2", "dweights"), got, leaves, strict=True):
        assert g.shape == leaf.shape and g.dtype == getattr(torch, dtype), name
        want = leaf.grad
        rel = float((g.double() - want).norm() / want.norm())
        assert rel < TOL[dtype], (name, rel)


CASES = [  # (tokens, hidden, intermediate, experts, top_k), dtype
    ((1, 32, 32, 4, 1), "float32"),  # one slot: three experts idle
    ((9, 48, 40, 6, 2), "float32"),  # H and I not powers of two, I over two column tiles
    ((40, 32, 72, 3, 2), "float32"),  # a block of 32; the experts over two or three blocks
    ((13, 64, 32, 8, 2), "float16"),
    ((17, 32, 64, 4, 2), "bfloat16"),
    ((2, 32, 32, 16, 4), "float32"),  # fewer slots than experts: the sorted rows' tight bound
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, (*c[0], c[1]))))
def test_autograd_matches_the_float64_reference(case: tuple) -> None:
    shape, dtype = case
    x, w1, w2, weights, ids, dy = _inputs(*shape, dtype)
    want, leaves = fused_moe_torch_reference(x, w1, w2, weights, ids)
    np.testing.assert_allclose(  # the torch reference is the NumPy forward's
        want.detach().numpy(),
        fused_moe_reference(*(t.detach().numpy() for t in leaves), ids.numpy()),
    )
    want.backward(dy.double())
    inputs = [t.clone().requires_grad_() for t in (x, w1, w2, weights)]
    out = ops.fused_moe(*inputs, ids)
    out.backward(dy)
    _check([t.grad for t in inputs], leaves, dtype)


@pytest.mark.parametrize("block", [16, 32])
def test_blocks_of_16_and_32_sorted_slots(block: int) -> None:
    """Experts over several blocks, so each weight gradient sums several steps of its rows;
    top_k 2 with every row naming its expert twice."""
    x, w1, w2, weights, ids, dy = _inputs(33, 32, 32, 4, 2, "float32")
    ids[:, 1] = ids[:, 0]
    want, leaves = fused_moe_torch_reference(x, w1, w2, weights, ids)
    want.backward(dy.double())
    _check(_fused_moe_backward(dy, x, w1, w2, weights, ids, block), leaves, "float32")


def test_numpy_fl_tensors_fake_kernel_and_empty_batch() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    x, w1, w2, weights, ids, dy = _inputs(5, 32, 32, 4, 2, "float32")
    want, leaves = fused_moe_torch_reference(x, w1, w2, weights, ids)
    want.backward(dy.double())
    nps = [t.numpy() for t in (dy, x, w1, w2, weights, ids)]
    got = fused_moe_backward(*nps)
    assert all(isinstance(g, np.ndarray) for g in got)
    _check([torch.from_numpy(g) for g in got], leaves, "float32")
    got = fused_moe_backward(*(fl.asarray(a) for a in nps))
    assert all(isinstance(g, fl.Tensor) for g in got)
    _check([torch.from_numpy(g.numpy()) for g in got], leaves, "float32")
    got = torch.ops.fearless.fused_moe_backward(dy, x, w1, w2, weights, ids)
    _check(got, leaves, "float32")
    with FakeTensorMode():
        fx, fw1, fw2 = torch.empty(5, 64), torch.empty(3, 32, 64), torch.empty(3, 64, 16)
        fw, fids = torch.empty(5, 2), torch.zeros(5, 2, dtype=torch.int64)
        shapes = [
            g.shape for g in torch.ops.fearless.fused_moe_backward(fx, fx, fw1, fw2, fw, fids)
        ]
        assert shapes == [(5, 64), (3, 32, 64), (3, 64, 16), (5, 2)]
    got = fused_moe_backward(dy[:0], x[:0], w1, w2, weights[:0], ids[:0])
    assert [g.shape for g in got] == [(0, 32), w1.shape, w2.shape, (0, 2)]
    assert not got[1].any() and not got[2].any()  # no token: zero weight gradients


def test_refusals_are_fearless_errors() -> None:
    x, w1, w2, weights, ids, dy = _inputs(4, 32, 32, 4, 2, "float32")
    with pytest.raises(fl.KernelTypeError, match=r"`grad_output` .* must be hidden_states' shape"):
        fused_moe_backward(dy[:3], x, w1, w2, weights, ids)
    with pytest.raises(fl.KernelTypeError, match=r"dtype f32 .* got \(4, 32\) f16"):
        fused_moe_backward(dy.half(), x, w1, w2, weights, ids)
    bad = ids.clone()
    bad[1, 0] = 9
    with pytest.raises(fl.KernelIndexError, match=r"`topk_ids\[1, 0\]` .* is 9, outside 0..3"):
        fused_moe_backward(dy, x, w1, w2, weights, bad)
    with pytest.raises(fl.KernelTypeError, match=r"fused_moe_backward` needs .* shapes"):
        fused_moe_backward(dy, x, w1, w2[:3], weights, ids)


@pytest.mark.parametrize(
    "dtype", [pytest.param("f16", marks=pytest.mark.slow), "bf16"]
)  # f16: make test-slow
def test_the_backward_kernels_compile_through_tileiras(
    cubin: Callable[..., bytes], dtype: str
) -> None:
    dt = getattr(fl, dtype)
    rows, tokens, hidden, inter, experts = 1024 + 8 * 127, 512, 1024, 512, 8
    ids, blocks = fl.zeros((rows,), dtype=fl.i32), fl.zeros((rows // 128,), dtype=fl.i32)
    one, cumsum = fl.zeros((1,), dtype=fl.i32), fl.zeros((experts + 1,), dtype=fl.i32)
    x, dy = fl.zeros((tokens, hidden), dtype=dt), fl.zeros((tokens, hidden), dtype=dt)
    w1 = fl.zeros((experts, 2, inter, hidden), dtype=dt)
    w2 = fl.zeros((experts, hidden, inter), dtype=dt)
    weights = fl.zeros((1024,), dtype=fl.f32)
    act, dh = fl.empty((rows, inter), dtype=dt), fl.empty((rows, inter, 2), dtype=dt)
    dwp = fl.empty((rows, inter // 64), dtype=fl.f32)
    with (
        act.partition((128, 64)) as pa,
        dh.partition((128, 64, 2)) as ph,
        dwp.partition((128, 1)) as pw,
    ):
        args = (pa, ph, pw, x, dy, w1, w2, ids, blocks, one, weights, 2, 64)
        assert cubin(make_moe_act_bwd(dt), *args)
    with fl.empty((rows, hidden), dtype=dt).partition((128, 64)) as out:
        assert cubin(
            make_moe_dx(dt), out, fl.zeros((rows, 2 * inter), dtype=dt), w1, blocks, one, 64
        )
    with fl.empty((experts, 2, inter, hidden), dtype=dt).partition((1, 1, 64, 64)) as out:
        assert cubin(make_moe_dw1(dt), out, dh, x, ids, cumsum, 2, 64)
    with fl.empty((experts, hidden, inter), dtype=dt).partition((1, 64, 64)) as out:
        assert cubin(make_moe_dw2(dt), out, act, dy, ids, cumsum, 2, 64)
    with fl.empty((1024,), dtype=dt).partition((256,)) as out:
        assert cubin(make_moe_dweights(dt), out, dwp, ids, 8)
