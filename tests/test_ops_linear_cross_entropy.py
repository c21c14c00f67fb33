"""fearless.ops.fused_linear_cross_entropy (ops/linear_cross_entropy.py) on the simulator,
against torch's CPU F.cross_entropy(F.linear(h, w, b)): every reduction, bias or none, tokens
not a multiple of the chunk, vocabularies not a multiple of the tiles, ignored tokens, f32
and bf16; the gradients through autograd (torch.ops.fearless) against torch's; the refusals;
and the kernels through tileiras."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config, ops
from fearless.ops import kernels_linear_ce as kl

torch = pytest.importorskip("torch")
F = torch.nn.functional


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", "sim")
    monkeypatch.setenv("FEARLESS_AUTOTUNE", "0")  # the first configuration


def _case(
    n: int, h: int, v: int, bias: bool, seed: int = 0, lead: tuple[int, ...] | None = None
) -> tuple[Any, Any, Any, Any]:
    """hidden (lead or (n,), h), weight (v, h), target with every third token ignored, bias."""
    g = torch.Generator().manual_seed(seed)
    shape = lead or (n,)
    hidden = torch.randn(*shape, h, generator=g)
    weight = torch.randn(v, h, generator=g) * 0.5
    target = torch.randint(0, v, shape, generator=g)
    target.view(-1)[::3] = -100
    b = torch.randn(v, generator=g) if bias else None
    return hidden, weight, target, b


def _bf16(h: Any, w: Any, t: Any, b: Any) -> tuple[Any, Any, Any, Any]:
    """The floats of a case in bf16 (the target stays int64)."""
    return h.bfloat16(), w.bfloat16(), t, (b.bfloat16() if b is not None else None)


def _reference(h: Any, w: Any, t: Any, b: Any, reduction: str, ignore_index: int = -100) -> Any:
    logits = F.linear(h, w, b).reshape(-1, w.shape[0])
    loss = F.cross_entropy(logits, t.reshape(-1), ignore_index=ignore_index, reduction=reduction)
    return loss.reshape(t.shape) if reduction == "none" else loss


# (tokens, hidden, vocab, chunk): tokens not a multiple of the chunk, vocab not a multiple of
# the GEMM's 128 nor of the row chunks, one chunk and many
SHAPES = [(10, 24, 50, 4), (37, 40, 300, 16), (5, 8, 7, 4096)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("bias", [True, False])
def test_the_loss_matches_torch_in_f32(
    shape: tuple[int, int, int, int], reduction: str, bias: bool
) -> None:
    n, hd, v, chunk = shape
    h, w, t, b = _case(n, hd, v, bias)
    got = ops.fused_linear_cross_entropy(h, w, t, b, chunk_size=chunk, reduction=reduction)
    want = _reference(h, w, t, b, reduction)
    assert got.dtype == torch.float32 and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_the_loss_matches_torch_in_bf16(reduction: str) -> None:
    h, w, t, b = _bf16(*_case(19, 32, 130, True))
    got = ops.fused_linear_cross_entropy(h, w, t, b, chunk_size=8, reduction=reduction)
    want = _reference(h.float(), w.float(), t, b.float(), reduction)  # f32 of the bf16 inputs
    assert got.dtype == torch.bfloat16 and got.shape == want.shape
    torch.testing.assert_close(got.float(), want, rtol=3e-2, atol=3e-2)


def test_leading_axes_and_another_ignore_index() -> None:
    """hidden (B, S, H) with target (B, S), as TileGym takes them; ignore_index inside the
    vocabulary ignores that class, as torch does."""
    h, w, t, _ = _case(0, 16, 40, False, lead=(2, 7))
    t = t.clamp(min=0)
    t[0, :3] = 5
    for reduction in ("mean", "none"):
        got = ops.fused_linear_cross_entropy(
            h, w, t, ignore_index=5, chunk_size=5, reduction=reduction
        )
        torch.testing.assert_close(got, _reference(h, w, t, None, reduction, 5))


def test_every_token_ignored_is_nan_for_mean_as_torch() -> None:
    h, w, t, _ = _case(6, 8, 12, False)
    t[:] = -100
    got = ops.fused_linear_cross_entropy(h, w, t, chunk_size=4)
    assert torch.isnan(got) and torch.isnan(_reference(h, w, t, None, "mean"))
    assert float(ops.fused_linear_cross_entropy(h, w, t, reduction="sum")) == 0.0


def test_numpy_and_fl_tensors_in_and_out() -> None:
    h, w, t, b = _case(9, 16, 33, True)
    want = float(_reference(h, w, t, b, "mean"))
    args = [x.numpy() for x in (h, w, t, b)]
    got = ops.fused_linear_cross_entropy(*args, chunk_size=4)
    assert isinstance(got, np.ndarray) and got.shape == ()
    assert abs(float(got) - want) < 1e-5
    fl_args = [fl.asarray(a) for a in args]
    got_fl = ops.fused_linear_cross_entropy(*fl_args, chunk_size=4)
    assert isinstance(got_fl, fl.Tensor) and abs(float(got_fl.numpy()) - want) < 1e-5


def _grads(fn: Callable[..., Any], dy: Any, *inputs: Any) -> list[Any]:
    leaves = [None if x is None else x.detach().clone().requires_grad_() for x in inputs]
    fn(*leaves).backward(dy)
    return [None if x is None else x.grad for x in leaves]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("chunk", [3, 4096])
def test_the_gradients_match_torch_autograd(reduction: str, bias: bool, chunk: int) -> None:
    """float64 torch reference of the f32 inputs; the incoming gradient is not 1 (and per
    token for "none", the backward's own chunk loop)."""
    h, w, t, b = _case(11, 24, 70, bias, seed=1)
    g = torch.Generator().manual_seed(2)
    dy = torch.randn(t.shape if reduction == "none" else (), generator=g)

    def ours(h_: Any, w_: Any, b_: Any) -> Any:
        return ops.fused_linear_cross_entropy(h_, w_, t, b_, chunk_size=chunk, reduction=reduction)

    def theirs(h_: Any, w_: Any, b_: Any) -> Any:
        return _reference(h_, w_, t, b_, reduction)

    got = _grads(ours, dy, h, w, b)
    want = _grads(theirs, dy.double(), h.double(), w.double(), b.double() if bias else None)
    for x, y in zip(got, want, strict=True):
        if y is None:
            assert x is None
            continue
        assert x.dtype == torch.float32 and x.shape == y.shape
        torch.testing.assert_close(x.double(), y, rtol=1e-5, atol=1e-6)


def test_the_torch_operator_returns_the_gradients_for_one() -> None:
    """torch.ops.fearless.fused_linear_cross_entropy: (loss, dh, dW, db) for an incoming 1."""
    h, w, t, b = _case(8, 16, 20, True)
    loss, dh, dw, db = torch.ops.fearless.fused_linear_cross_entropy(h, w, t, b, -100, 3, "sum")
    want = _grads(lambda *a: _reference(*a[:2], t, a[2], "sum"), torch.tensor(1.0), h, w, b)
    torch.testing.assert_close(loss, _reference(h, w, t, b, "sum"))
    for x, y in zip((dh, dw, db), want, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def test_bf16_gradients_match_torch_loosely() -> None:
    h, w, t, _ = _bf16(*_case(13, 32, 90, False))
    dh, dw = _grads(lambda a, c: ops.fused_linear_cross_entropy(a, c, t, chunk_size=4), None, h, w)
    rh, rw = _grads(lambda a, c: _reference(a, c, t, None, "mean"), None, h.float(), w.float())
    assert dh.dtype == dw.dtype == torch.bfloat16
    torch.testing.assert_close(dh.float(), rh, rtol=3e-2, atol=1e-2)
    torch.testing.assert_close(dw.float(), rw, rtol=3e-2, atol=1e-2)


@pytest.mark.parametrize("bias", [True, False])
def test_accumulating_in_the_weights_dtype_needs_no_f32_buffer(bias: bool) -> None:
    """accum_dtype None, the weight's dtype (Liger's default): every chunk adds into dW and db
    in bf16, no f32 buffer of the weight's size is allocated, and the gradients stay within
    bf16's rounding of the f32-summed ones (accum_dtype=torch.float32)."""
    from fearless.ops import _io

    h, w, t, b = _bf16(*_case(29, 32, 90, bias, seed=3))
    made: list[tuple[int, ...]] = []
    real = _io.empty_beside

    def spy(like: Any, shape: Any, dtype: Any) -> Any:
        made.append((tuple(shape), dtype))
        return real(like, shape, dtype)

    def run(accum: Any) -> list[Any]:
        made.clear()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("fearless.ops.linear_cross_entropy.empty_beside", spy)
            return _grads(
                lambda a, c, d: ops.fused_linear_cross_entropy(
                    a, c, t, d, chunk_size=4, accum_dtype=accum
                ),
                None, h, w, b,
            )  # fmt: skip

    low = run(None)
    assert ((90, 32), fl.f32) not in made and ((90,), fl.f32) not in made
    f32 = run(torch.float32)
    assert ((90, 32), fl.f32) in made
    for x, y in zip(low, f32, strict=True):
        if y is None:
            assert x is None
            continue
        assert x.dtype == torch.bfloat16
        torch.testing.assert_close(x.float(), y.float(), rtol=4e-2, atol=2e-3)
    assert not torch.equal(low[1], f32[1])  # the per-chunk rounding shows in bf16
    assert torch.equal(run(fl.bf16)[1], low[1])  # the weight's dtype, named
    assert torch.equal(run("float32")[1], f32[1])  # a fearless name of float32
    f32_in = _case(29, 32, 90, bias, seed=3)  # f32 weights: float32 is their own dtype
    ops.fused_linear_cross_entropy(*f32_in, chunk_size=4, accum_dtype=torch.float32)
    made.clear()
    with pytest.MonkeyPatch.context() as mp:  # no gradient asked: no sums at all
        mp.setattr("fearless.ops.linear_cross_entropy.empty_beside", spy)
        ops.fused_linear_cross_entropy(h, w, t, b, chunk_size=4, accum_dtype=torch.float32)
    assert ((90, 32), fl.f32) not in made


@pytest.mark.parametrize(("bias", "accum", "reduction"), [
    (False, None, "mean"), (True, None, "sum"), (True, torch.float32, "mean"),
    (False, None, "none"),
])  # fmt: skip
def test_the_gemms_through_torch_give_what_the_kernels_give(
    bias: bool, accum: Any, reduction: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the GPU, torch operands take their three GEMMs through torch (cuBLAS,
    `linear_cross_entropy._CuBlas`) and the row kernel through fearless: driven here on the
    simulator with CPU torch tensors, the loss and the gradients are fearless's kernels' own,
    over several chunks, with a bias, f32 sums across chunks and reduction "none"'s backward."""
    from fearless.ops import linear_cross_entropy as lce

    h, w, t, b = _case(29, 32, 90, bias, seed=3)
    made: list[int] = []
    cublas = lce._CuBlas.of.__func__  # type: ignore[attr-defined]

    def run() -> list[Any]:
        leaves = [x.detach().clone().requires_grad_() for x in (h, w, b) if x is not None]
        loss = ops.fused_linear_cross_entropy(
            *leaves[:2], t, leaves[2] if bias else None, chunk_size=8, reduction=reduction,
            accum_dtype=accum,
        )  # fmt: skip
        loss.sum().backward()
        return [loss.detach(), *(x.grad for x in leaves)]

    want = run()
    monkeypatch.setattr(lce._CuBlas, "takes", staticmethod(lambda p: p.h.kind == "torch"))
    monkeypatch.setattr(
        lce._CuBlas,
        "of",
        classmethod(lambda cls, p, outs: (made.append(1), cublas(cls, p, outs))[1]),
    )
    got = run()
    assert made
    for x, y in zip(got, want, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------- refusals


def _refused(match: str, *args: Any, **kwargs: Any) -> fl.KernelTypeError:
    with pytest.raises(fl.KernelTypeError, match=match) as info:
        ops.fused_linear_cross_entropy(*args, **kwargs)
    err = info.value
    assert err.code == "E0701" and "test_ops_linear_cross_entropy.py" in str(err)
    return err


def test_a_target_outside_the_vocabulary_is_refused_before_any_kernel() -> None:
    h, w, t, _ = _case(6, 8, 10, False)
    for bad in (10, -1, 1 << 40):
        t2 = t.clone()
        t2[4] = bad
        err = _refused(rf"holds {bad} at token 4 .*outside the vocabulary \[0, 10\)", h, w, t2)
        assert "ignore_index" in str(err)


@pytest.mark.parametrize("lanes", [False, True])
def test_both_log_sum_exps_match_numpy(lanes: bool) -> None:
    """The row kernel's two log-sum-exps (a block-wide max and sum per chunk, or each lane's
    own, combined at the end) give NumPy's loss and gradient, over several chunks, a
    vocabulary that is no power of two (its padding reads -inf), -inf logits, a row whose
    largest logit comes last and an ignored row."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 300)) * 4).astype(np.float32)
    x[1, :50] = -np.inf
    x[2, 299] = 40.0
    logits = fl.asarray(x.copy())
    loss = fl.zeros((4,), dtype=fl.f32)
    target = fl.asarray(np.array([3, 299, 7, -100], np.int64))
    scale = fl.asarray(np.full(4, 0.5, np.float32))
    kernel = kl.make_cross_entropy(fl.f32, fl.f32, 64, True, lanes)
    with logits.partition((1, 512)) as xp, loss.partition((1,)) as lp:
        kernel(xp, lp, target, scale, -100)
    lse = np.log(np.exp(x.astype(np.float64)).sum(axis=1))
    want = np.array([lse[0] - x[0, 3], lse[1] - x[1, 299], lse[2] - x[2, 7], 0.0])
    np.testing.assert_allclose(loss.numpy(), want, rtol=1e-5, atol=1e-5)
    grad = np.exp(x - lse[:, None])
    for row, col in ((0, 3), (1, 299), (2, 7)):
        grad[row, col] -= 1.0
    grad[3] = 0.0
    np.testing.assert_allclose(logits.numpy(), grad * 0.5, rtol=1e-5, atol=1e-6)


def test_the_kernels_never_index_with_the_target() -> None:
    """Below the host's check: a row whose target is outside [0, V) gets no target logit and
    no onehot (it matches no column), and the kernel writes only its own row."""
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    logits = fl.asarray(x.copy())
    loss = fl.zeros((3,), dtype=fl.f32)
    target = fl.asarray(np.array([2, 8, -5], np.int64))
    scale = fl.asarray(np.ones(3, np.float32))
    kl.cross_entropy_tuned(logits, loss, target, scale, -100, True)
    lse = np.log(np.exp(x).sum(axis=1))
    want_loss = np.array([lse[0] - x[0, 2], lse[1], lse[2]], np.float32)
    np.testing.assert_allclose(loss.numpy(), want_loss, rtol=1e-5)
    softmax = np.exp(x - lse[:, None])
    softmax[0, 2] -= 1.0
    np.testing.assert_allclose(logits.numpy(), softmax, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda a: {**a, "reduction": "avg"}, "must be 'mean', 'sum' or 'none'"),
        (lambda a: {**a, "weight": a["weight"][:, :4]}, r"takes hidden_states \(..., H\)"),
        (lambda a: {**a, "weight": a["weight"].double()}, "takes f32, f16, bf16"),
        (lambda a: {**a, "weight": a["weight"].bfloat16()}, "must be one dtype"),
        (lambda a: {**a, "bias": a["weight"][:, 0][:5]}, r"`bias` .* must be \(10,\)"),
        (lambda a: {**a, "target": a["target"].float()}, "must hold class indices"),
        (lambda a: {**a, "target": a["target"][:3]}, "needs one class index per token"),
        (lambda a: {**a, "chunk_size": 0}, "at least 1"),
        (lambda a: {**a, "chunk_size": 2.5}, "must be an int"),
        (lambda a: {**a, "ignore_index": None}, "must be an int"),
        (lambda a: {**a, "accum_dtype": torch.float16}, "must be float32 or the weight's dtype"),
        (lambda a: {**a, "accum_dtype": "nope"}, "must be float32 or the weight's dtype"),
    ],
)
def test_mistakes_are_clear_errors(change: Callable[..., Any], match: str) -> None:
    h, w, t, _ = _case(6, 8, 10, False)
    args = change({"hidden_states": h, "weight": w, "target": t})
    _refused(match, **args)


def test_a_wrong_accum_dtype_is_the_operators_error_under_autograd_too() -> None:
    h, w, t, _ = _case(6, 8, 10, False)
    _refused("must be float32 or the weight's dtype", h, w.requires_grad_(), t, accum_dtype="x")


def test_the_kernels_compile_through_tileiras(cubin: Callable[..., bytes]) -> None:
    bf16, m, hd, v = fl.bf16, 64, 128, 1000
    a, w = fl.zeros((m, hd), dtype=bf16), fl.zeros((v, hd), dtype=bf16)
    b = fl.zeros((v,), dtype=bf16)
    g = fl.zeros((m, v), dtype=bf16)
    acc = fl.zeros((v, hd), dtype=fl.f32)
    tgt, scale = fl.zeros((m,), dtype=fl.i64), fl.zeros((m,), dtype=fl.f32)
    cases = [
        (kl.make_logits(bf16, True), (fl.zeros((m, v), dtype=bf16).partition((64, 128)), a, w, b, 64)),
        (kl.make_logits(bf16, False), (fl.zeros((m, v), dtype=bf16).partition((64, 128)), a, w, b, 64)),
        (
            kl.make_cross_entropy(bf16, fl.f32, 256, True, True),
            (fl.zeros((m, v), dtype=bf16).partition((1, 1024)), fl.zeros((m,), dtype=fl.f32).partition((1,)), tgt, scale, -100),
        ),
        (
            kl.make_cross_entropy(bf16, fl.f32, 256, True),
            (fl.zeros((m, v), dtype=bf16).partition((1, 1024)), fl.zeros((m,), dtype=fl.f32).partition((1,)), tgt, scale, -100),
        ),
        (kl.make_dw(bf16, fl.f32, False, False), (fl.zeros((v, hd), dtype=fl.f32).partition((128, 128)), g, a, 64)),
        (kl.make_dw(bf16, bf16, False, True), (fl.zeros((v, hd), dtype=bf16).partition((128, 128)), acc, g, a, 64)),
        (kl.make_db(bf16, bf16, False, True), (fl.zeros((v,), dtype=bf16).partition((256,)), fl.zeros((v,), dtype=fl.f32), g, 64)),
        (kl.make_dw(bf16, bf16, False, False), (fl.zeros((v, hd), dtype=bf16).partition((128, 128)), g, a, 64)),
        (kl.make_db(bf16, bf16, False, False), (fl.zeros((v,), dtype=bf16).partition((256,)), g, 64)),
        (kl.make_loss_sum(bf16, 64), (fl.zeros((1,), dtype=bf16).partition((1,)), scale, 1.0)),
    ]  # fmt: skip
    for kernel, arguments in cases:
        assert cubin(kernel, *arguments)


def test_the_backward_scales_the_saved_gradients_in_place() -> None:
    """The loss's backward multiplies the gradients the forward kept by the incoming one in
    place (no second grad_weight); a second backward through them is a fearless error at the
    caller's line (it was torch's raw version-check error), never a gradient scaled twice."""
    h, w, t, _ = _case(9, 16, 40, False)
    w = w.requires_grad_()
    loss = ops.fused_linear_cross_entropy(h, w, t, chunk_size=4)
    (loss * 3.0).backward(retain_graph=True)
    want = _grads(lambda a: _reference(h, a, t, None, "mean") * 3.0, None, w)[0]
    torch.testing.assert_close(w.grad, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(fl.KernelTypeError, match="a second backward through") as info:
        loss.backward()
    assert f"{__file__}:" in str(info.value)
