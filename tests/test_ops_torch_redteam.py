"""fearless.ops inside torch, the red team's findings: two dropouts of one tensor in a compiled
graph keep two masks; the fused loss's gradient outputs are values its backward leaves alone;
a backward that gets no gradient (None) gives none; splitk_reduce refuses an attn_out that
overlaps its inputs; torch.compile traces fmha_varlen's list lengths and names the operators
it cannot trace; sdpa's mask that requires grad gets its own message. On the simulator with
small CPU tensors."""

from __future__ import annotations

from typing import Any

import pytest

import fearless as fl
from fearless import config, ops

torch = pytest.importorskip("torch")
pytest.importorskip("fearless.ops.torch_ops")
F = torch.nn.functional


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")


def _gen(seed: int = 0) -> Any:
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------------------ 1. dropout


def test_two_dropouts_of_one_tensor_keep_two_masks_in_a_compiled_training_graph() -> None:
    """The seed is drawn by torch's generator in the graph, one draw per call, so AOTAutograd's
    common-subexpression elimination cannot merge the two dropouts into one mask; the backward
    replays each mask from its own seed."""
    torch._dynamo.reset()

    def block(x: Any) -> tuple[Any, Any]:
        return ops.dropout(x, 0.5), ops.dropout(x, 0.5)

    x = torch.ones(4, 64, requires_grad=True)
    a, b = torch.compile(block, fullgraph=True, backend="aot_eager")(x)
    assert not torch.equal(a != 0, b != 0)
    (a.sum() + 2 * b.sum()).backward()
    want = 2.0 * ((a != 0).float() + 2 * (b != 0).float())
    torch.testing.assert_close(x.grad, want)


def test_dropout_through_torch_follows_torch_manual_seed() -> None:
    x = torch.ones(4, 64, requires_grad=True)
    torch.manual_seed(3)
    first = ops.dropout(x, 0.5)
    torch.manual_seed(3)
    again = ops.dropout(x, 0.5)
    other = ops.dropout(x, 0.5)
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_the_torch_dropout_takes_its_seed_as_a_tensor() -> None:
    x = torch.randn(4, 32, generator=_gen())
    y = torch.ops.fearless.dropout(x, 0.5, torch.tensor(11))
    torch.testing.assert_close(y, ops.dropout(x, 0.5, seed=11))
    with pytest.raises(fl.KernelTypeError, match="one-element integer tensor") as info:
        torch.ops.fearless.dropout(x, 0.5, torch.tensor(1.5))
    assert f"{__file__}:" in str(info.value)


# ---------------------------------------------------------------- 2. fused linear cross-entropy


def _lce_case(bias: bool = False) -> tuple[Any, Any, Any, Any]:
    g = _gen(1)
    h = torch.randn(6, 16, generator=g).requires_grad_()
    w = torch.randn(10, 16, generator=g).requires_grad_()
    t = torch.randint(0, 10, (6,), generator=g)
    b = torch.randn(10, generator=g).requires_grad_() if bias else None
    return h, w, t, b


def test_the_torch_losss_gradient_outputs_are_values_its_backward_leaves_alone() -> None:
    """The gradients beside the loss are not differentiable (a loss through them is refused),
    and the backward scales copies: the tensors the caller holds keep their values, and a
    second backward through the loss (retain_graph) adds the same gradient again."""
    h, w, t, _ = _lce_case()
    loss, gh, gw, _ = torch.ops.fearless.fused_linear_cross_entropy(
        h, w, t, None, -100, 4, "mean", None
    )
    assert not gh.requires_grad and not gw.requires_grad
    kept = gh.clone(), gw.clone()
    (loss * 3.0).backward(retain_graph=True)
    torch.testing.assert_close((gh, gw), kept, rtol=0, atol=0)
    torch.testing.assert_close(h.grad, kept[0] * 3.0)
    assert h.grad.data_ptr() != gh.data_ptr()
    (loss * 3.0).backward()
    torch.testing.assert_close(w.grad, kept[1] * 6.0)
    with pytest.raises(RuntimeError, match="does not require grad"):
        gh.square().sum().backward()


def test_a_gradient_of_the_fused_loss_with_create_graph_is_refused() -> None:
    h, w, t, _ = _lce_case()
    with pytest.raises(fl.KernelTypeError, match="first-order gradients only") as info:
        torch.autograd.grad(
            ops.fused_linear_cross_entropy(h, w, t, chunk_size=4), h, create_graph=True
        )
    assert f"{__file__}:" in str(info.value)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_the_fused_loss_passes_opcheck(reduction: str) -> None:
    h, w, t, b = _lce_case(bias=True)
    torch.library.opcheck(
        torch.ops.fearless.fused_linear_cross_entropy.default,
        (h, w, t, b, -100, 4, reduction, None),
    )


# --------------------------------------------------------------- 3. no gradient reaches an output


class _Cut(torch.autograd.Function):
    """An operator whose backward gives its input no gradient (None)."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        return None


_ATTENTIONS = {
    "sdpa": lambda q, k, v: ops.scaled_dot_product_attention(q, k, v),
    "fmha": lambda q, k, v: ops.fmha(q, k, v),
    "swa_attention": lambda q, k, v: ops.swa_attention(q, k, v, 3),
    "flash_attn_func": lambda q, k, v: ops.flash_attn_func(q, k, v),
}


@pytest.mark.parametrize("name", sorted(_ATTENTIONS))
def test_an_attention_given_no_gradient_gives_none(name: str) -> None:
    q, k, v = (torch.randn(1, 2, 8, 16, generator=_gen(i)).requires_grad_() for i in range(3))
    loss = _Cut.apply(_ATTENTIONS[name](q, k, v)).sum() + (q * q).sum()
    loss.backward()
    torch.testing.assert_close(q.grad, 2 * q.detach())
    assert k.grad is None and v.grad is None


def test_dropout_and_the_fused_loss_given_no_gradient_give_none() -> None:
    x = torch.randn(4, 8, generator=_gen()).requires_grad_()
    (_Cut.apply(ops.dropout(x, 0.5)).sum() + (x * x).sum()).backward()
    torch.testing.assert_close(x.grad, 2 * x.detach())
    h, w, t, _ = _lce_case()
    (_Cut.apply(ops.fused_linear_cross_entropy(h, w, t, chunk_size=4)) + (h * h).sum()).backward()
    torch.testing.assert_close(h.grad, 2 * h.detach())
    assert w.grad is None


# ------------------------------------------------------------------- 4. splitk_reduce's aliases


def _splitk() -> tuple[Any, Any]:
    g = _gen(2)
    return torch.randn(2, 2, 5, 24, generator=g), torch.randn(2, 2, 5, generator=g)


def test_splitk_reduce_refuses_a_strided_attn_out_inside_its_partials() -> None:
    """A strided view is copied dense for the kernel, which hid it from the launch's borrow
    check, and written back over the input it aliases: refused, naming the user's arguments."""
    o, lse = _splitk()
    before = o.clone()
    with pytest.raises(
        fl.BorrowError,
        match=r"`attn_out` of `fearless\.ops\.splitk_reduce` shares memory with `attn_splitk_out`",
    ) as info:
        ops.splitk_reduce(o, lse, o[:, :, 0, :], 5 * 128)
    assert f"{__file__}:" in str(info.value)
    assert torch.equal(o, before)


def test_splitk_reduce_names_attn_out_for_contiguous_aliases_too() -> None:
    o, _ = _splitk()
    with pytest.raises(fl.BorrowError, match=r"`attn_out` .* `attn_splitk_out`"):
        ops.splitk_reduce(o, torch.randn(2, 2, 5), o.view(-1)[: 2 * 2 * 24].view(2, 2, 24), 640)
    buf = torch.randn(4 + 2 * 2 * 5)
    lse = buf[4:].view(2, 2, 5)  # a strided attn_out whose elements 4 and 6 are lse's
    with pytest.raises(fl.BorrowError, match=r"`attn_out` .* `lse_splitk_out`"):
        ops.splitk_reduce(torch.randn(2, 2, 5, 1), lse, buf[:8].view(2, 2, 2)[..., :1], 640)


# ---------------------------------------------------------------------------- 5. torch.compile


def test_fmha_varlen_with_list_lengths_compiles_fullgraph() -> None:
    torch._dynamo.reset()
    g = _gen(3)
    q = torch.randn(2, 4, 16, 16, generator=g)
    k, v = torch.randn(2, 2, 16, 16, generator=g), torch.randn(2, 2, 16, 16, generator=g)

    def run(q: Any, k: Any, v: Any) -> Any:
        return ops.fmha_varlen(q, k, v, q_lens=[16, 5])

    got = torch.compile(run, fullgraph=True, backend="eager")(q, k, v)
    torch.testing.assert_close(got, run(q, k, v))


_UNTRACEABLE = {
    "fmha_variant": lambda x: ops.fmha_variant(x, x, x),
    "nvfp4_quantize": lambda x: ops.nvfp4_quantize(x.reshape(-1, 16))[0],
}


@pytest.mark.parametrize("name", sorted(_UNTRACEABLE))
def test_an_operator_with_no_torch_form_says_so_under_torch_compile(name: str) -> None:
    """fullgraph: torch's Unsupported, its message naming the operator; without fullgraph the
    graph breaks there and the operator runs eagerly, as before."""
    run, x = _UNTRACEABLE[name], torch.randn(1, 2, 16, 16, generator=_gen(4))
    torch._dynamo.reset()
    with pytest.raises(Exception, match=rf"`fearless\.ops\.{name}` has no torch\.ops\.fearless"):
        torch.compile(run, fullgraph=True, backend="eager")(x)
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(run, backend="eager")(x), run(x))


# ------------------------------------------------------------------------ 6. sdpa's attn_mask


def test_sdpa_names_its_mask_when_only_the_mask_requires_grad() -> None:
    q, k, v = (torch.randn(1, 2, 4, 16, generator=_gen(i)) for i in range(3))
    mask = torch.randn(4, 4, generator=_gen(5)).requires_grad_()
    with pytest.raises(fl.KernelTypeError, match="gives no gradient for its `attn_mask`") as info:
        ops.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert f"{__file__}:" in str(info.value)
