"""The backward of `fearless.ops.fmha`, `swa_attention` and `gemma_attention` (issue 35): torch
autograd through `torch.ops.fearless.<name>_backward` (flash attention's backward kernels with
the forward's variant: bottom-right diagonal, window, soft cap) against torch autograd of a
float64 reference, on the simulator at ragged shapes with small tiles (key and query tiles
skipped and masked); rows that see no key; the sdpa backward's Tile IR unchanged; opcheck; the
new kernels through tileiras."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest

import fearless as fl
from fearless import ops
from fearless.ops import kernels_attention_backward as KB
from support.attention_variants_ref import bounds, variant_attention

torch = pytest.importorskip("torch")

TOL = {"float32": 2e-5, "bfloat16": 3e-2}
OPS = {"fmha": ops.fmha, "swa": ops.swa_attention, "gemma": ops.gemma_attention}


def _inputs(b: int, h: int, hk: int, lq: int, s: int, d: int, dtype: str) -> list[Any]:
    g = torch.Generator().manual_seed(lq * 1000 + s)
    shapes = ((b, h, lq, d), (b, hk, s, d), (b, hk, s, d), (b, h, lq, d))
    return [torch.randn(*x, generator=g).to(getattr(torch, dtype)) for x in shapes]


def _rel(got: Any, want: Any) -> float:
    return float(
        (got.detach().double() - want.detach()).norm() / max(float(want.detach().norm()), 1e-30)
    )


def _gradients(name: str, shape: tuple, dtype: str, kw: dict) -> tuple[list, list, Any]:
    """((out, dq, dk, dv) of the operator, the same of the reference, the operator's q)."""
    q, k, v, dout = _inputs(*shape, dtype)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out = OPS[name](q, k, v, **kw)
    out.backward(dout)
    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    want = variant_attention(*ref, kw.get("scaling"), **bounds(name, kw))
    want.backward(dout.double())
    return [out, q.grad, k.grad, v.grad], [want, *(t.grad for t in ref)], q


CASES = [  # (op, (B, H, H_kv, L, S, D), (query rows, keys) per backward tile, dtype, kwargs)
    ("fmha", (1, 4, 2, 37, 70, 16), (16, 32), "float32", {}),  # GQA, L < S, bottom-right
    ("fmha", (1, 2, 1, 70, 37, 16), (32, 16), "float32", {}),  # L > S: 33 rows see no key
    ("fmha", (2, 2, 1, 33, 20, 24), (16, 16), "float32", {"is_causal": False, "scaling": 0.3}),
    ("swa", (1, 4, 2, 30, 45, 16), (16, 16), "float32", {"window_size": 3}),
    ("swa", (1, 2, 1, 45, 30, 16), (16, 32), "float32", {"window_size": 100}),
    ("swa", (1, 2, 2, 30, 45, 16), (16, 16), "float32", {"window_size": 5, "is_causal": False}),
    ("gemma", (1, 2, 2, 40, 40, 16), (16, 16), "float32", {"soft_cap": 2.0}),
    ("gemma", (1, 4, 2, 30, 50, 16), (32, 16), "float32", {"soft_cap": 5.0, "window_size": 3}),
    ("gemma", (1, 2, 1, 50, 30, 16), (16, 16), "float32", {"window_size": 6, "is_causal": False}),
    ("gemma", (1, 4, 1, 45, 33, 16), (64, 64), "bfloat16", {"window_size": 6, "soft_cap": 1.5}),
]


@pytest.mark.parametrize(
    "case", CASES, ids=lambda c: f"{c[0]}-{'-'.join(map(str, c[1]))}-{c[3]}-{c[4]}"
)
def test_gradients_match_autograd_of_the_reference(
    case: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch autograd through the operators against torch autograd of the float64 reference;
    small backward tiles (both orders) so that many key and query tiles are skipped or masked.
    The three kernels (dk_dv, then dq): these head dims take FlashAttention-2's dQ by default,
    which the next test checks."""
    name, shape, tiles, dtype, kw = case
    monkeypatch.setattr(KB, "BACKWARD_TILES", tiles)
    monkeypatch.setattr(KB, "DQ_BY_ATOMICS_UP_TO", 0)
    got, want, q = _gradients(name, shape, dtype, kw)
    for what, g, w in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        assert g.dtype == q.dtype and g.shape == w.shape, what
        assert torch.isfinite(g).all(), what
        assert _rel(g, w) < TOL[dtype] * (1 if what == "out" else 2), (what, _rel(g, w))


@pytest.mark.parametrize(
    "case",
    [CASES[1], CASES[7]] + [pytest.param(c, marks=pytest.mark.slow) for c in (CASES[0], CASES[4])],
    ids=lambda c: c[0],
)  # rows that see no key (fmha, L > S) and the cap with a window (gemma); make test-slow: more
def test_the_atomic_dq_form_gives_the_reference_gradients(
    case: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`DQ_BY_ATOMICS_UP_TO`: dk_dv adds dS K into an f32 dQ (relaxed atomics) and no dq kernel
    runs; the gradients are the reference's as the three kernels' are (rows that see no key,
    windows, the cap, GQA)."""
    name, shape, tiles, dtype, kw = case
    monkeypatch.setattr(KB, "BACKWARD_TILES", tiles)
    monkeypatch.setattr(KB, "DQ_BY_ATOMICS_UP_TO", 1 << 16)
    monkeypatch.setattr(KB, "make_attention_dq", None)  # never made in this form
    got, want, _ = _gradients(name, shape, dtype, kw)
    for what, g, w in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        assert _rel(g, w) < TOL[dtype] * 2, (what, _rel(g, w))


def test_torchs_deterministic_mode_keeps_the_three_kernels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under `torch.use_deterministic_algorithms(True)` the backward never takes the atomic
    dQ (its adds' order varies from run to run): dk_dv then dq, whose gradients repeat bit for
    bit; without it, head dim 16 takes the atomic form."""
    name, shape, tiles, dtype, kw = CASES[0]
    monkeypatch.setattr(KB, "BACKWARD_TILES", tiles)
    taken: list[str] = []
    for tuner in ("atomic_tuned", "dq_tuned"):
        real = getattr(KB, tuner)
        monkeypatch.setattr(
            KB, tuner, lambda *a, _t=tuner, _r=real, **k: (taken.append(_t), _r(*a, **k))[1]
        )
    _gradients(name, shape, dtype, kw)
    assert taken == ["atomic_tuned"]
    taken.clear()
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        first = _gradients(name, shape, dtype, kw)[0]
        again = _gradients(name, shape, dtype, kw)[0]
    finally:
        torch.use_deterministic_algorithms(before)
    assert taken == ["dq_tuned", "dq_tuned"]
    for a, b in zip(first, again, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("d", [64, pytest.param(128, marks=pytest.mark.slow)])
def test_the_atomic_dq_kernels_compile_through_tileiras(
    cubin: Callable[..., bytes], d: int
) -> None:
    """dk_dv with its f32 dQ (a `tile.Atomic`, relaxed adds) at the atomic tuner's choice 0
    (two warp groups), and the finishing scale, bf16, causal, keys that fill no whole tile;
    with as many KV heads as query heads nothing spills (with two query heads a KV head, 40 to
    80 bytes a thread, tileiras 13.5)."""
    from fearless.backends.cubin_info import kernel_resources

    tm, tn, occupancy, warps = KB.backward_configs(d)["atomic"]
    q = fl.zeros((1, 4, 256, d), dtype=fl.bf16)
    stats, acc = fl.zeros((1, 4, 256)), fl.zeros((1, 4, 256, d))
    kernel = KB.make_attention_dkdv(fl.bf16, True, False, atomic_dq=True).options(
        occupancy=occupancy, num_worker_warps=warps
    )
    for kv_heads in (4, 2):
        kv = fl.zeros((1, kv_heads, 200, d), dtype=fl.bf16)
        dk, dv = (fl.empty(kv.shape, dtype=fl.bf16).partition((1, 1, tn, d)) for _ in range(2))
        group = 4 // kv_heads
        rest = (None, None, None, 0.125, 0, 0, 1.0, tm, group)
        (used,) = kernel_resources(cubin(kernel, dk, dv, acc, q, kv, kv, q, stats, stats, *rest))
        if group == 1:
            assert used.stack == 0  # its adds' registers fit beside dK and dV
    dq = fl.empty((1, 4, 256, d), dtype=fl.bf16).partition((1, 1, 64, d))
    assert cubin(KB.make_finish_dq(fl.bf16), dq, acc, 0.125)


def test_rows_that_see_no_key_have_zero_gradients(monkeypatch: pytest.MonkeyPatch) -> None:
    """L = 36 > S = 16: query i sits at i - 20, so the first 20 see no key (causal), 19 when a
    window reaches one key ahead (gemma, not causal); their output and their dq are exactly 0,
    the next row's dq is not, and nothing flows from them into dk, dv (the reference's such
    rows have no gradient)."""
    monkeypatch.setattr(KB, "BACKWARD_TILES", (16, 16))
    for name, kw, blind in (
        ("fmha", {}, 20),
        ("swa", {"window_size": 2}, 20),
        ("gemma", {"window_size": 1, "soft_cap": 3.0, "is_causal": False}, 19),
    ):
        got, want, _ = _gradients(name, (1, 2, 1, 36, 16, 16), "float32", kw)
        out, dq, dk, dv = got
        assert torch.equal(out[:, :, :blind], torch.zeros_like(out[:, :, :blind])), name
        assert torch.equal(dq[:, :, :blind], torch.zeros_like(dq[:, :, :blind])), name
        assert not torch.equal(dq[:, :, blind], torch.zeros_like(dq[:, :, blind])), name
        for g, w in zip((dq, dk, dv), want[1:], strict=True):
            assert _rel(g, w) < 4e-5, name


def test_no_keys_and_the_python_forms() -> None:
    """S = 0: every gradient is 0; NumPy and fl.Tensor operands give NumPy and fl.Tensor
    gradients (the backward ops called directly)."""
    q, k, v, dout = _inputs(1, 2, 1, 5, 0, 16, "float32")
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    ops.fmha(q, k, v).backward(dout)
    assert q.grad is not None and torch.equal(q.grad, torch.zeros_like(q))
    q, k, v, dout = _inputs(1, 2, 1, 12, 20, 16, "float32")
    out = ops.swa_attention(q, k, v, 4)
    ref = [t.double().requires_grad_() for t in (q, k, v)]
    variant_attention(*ref, None, True, 3).backward(dout.double())
    arrays = [t.numpy() for t in (dout, q, k, v, out)]
    for form in (lambda a: a, fl.asarray):
        grads = ops.attention_variants.swa_attention_backward(*map(form, arrays), 4)
        for g, w in zip(grads, ref, strict=True):
            assert isinstance(g, type(form(arrays[0])))
            assert (
                _rel(torch.from_numpy(g if isinstance(g, type(arrays[0])) else g.numpy()), w.grad)
                < 4e-5
            )


def test_refusals_are_fearless_errors() -> None:
    q, k, v, dout = _inputs(1, 4, 2, 6, 6, 16, "float32")
    back = ops.attention_variants
    with pytest.raises(fl.KernelTypeError, match="window_size an int of 0 or more"):
        back.swa_attention_backward(dout, q, k, v, dout, -1)
    with pytest.raises(fl.KernelTypeError, match="soft_cap above 0"):
        back.gemma_attention_backward(dout, q, k, v, dout, soft_cap=0.0)
    with pytest.raises(fl.KernelTypeError, match="dtypes"):
        back.fmha_backward(dout.half(), q, k, v, dout)
    with pytest.raises(fl.KernelTypeError, match="dout"):
        back.fmha_backward(dout[:, :, :3], q, k, v, dout)
    with pytest.raises(fl.KernelTypeError, match="H a multiple of H_kv"):
        back.fmha_backward(
            dout, q, k[:, :1].expand(1, 3, 6, 16), v[:, :1].expand(1, 3, 6, 16), dout
        )


# sha256 (first 16 hex digits) of the Tile IR text of the sdpa backward's kernels (bf16, q of
# (1, 4, 256, 64), k/v of (1, 2, S, 64), 64 x 64 tiles): a change here changes
# scaled_dot_product_attention's backward. Last changed 2026-12-07, on purpose: the masked
# forms (causal, or S not a multiple of the key tile) replace a masked score by -inf instead of
# adding -inf (a NaN key no row sees reaches no row); the unmasked form (False, True) is as it
# was. Before: 2026-12-06, the mask applied only to the tiles that cross the diagonal or hold
# the last key (a run-time `if`, as the forward); 2026-12-05, dk_dv loads its key and value
# tiles once.
SDPA_IR = {
    (False, False): ("889bbba624a0f8b5", "564ebe05adefd6aa", "fa5abc3da479a1c4"),
    (False, True): ("eedb8a728324ef7c", "9281738bd531e8cc", "adb25a3bd96355bd"),
    (True, False): ("65e499d3bbe1f9f7", "11c779816c0ecc45", "96fd78bc48ad1c51"),
}


def _backward_launches(variant: tuple | None, even_k: bool) -> list[tuple[Any, tuple]]:
    """The three kernels (causal filled in later) and their arguments, bf16 at 64 x 64 tiles."""
    s = 256 if even_k else 200
    q = fl.zeros((1, 4, 256, 64), dtype=fl.bf16)
    kv = fl.zeros((1, 2, s, 64), dtype=fl.bf16)
    stats = fl.zeros((1, 4, 256))
    lse, delta = (fl.empty((1, 4, 256)).partition((1, 1, 64)) for _ in range(2))
    dk, dv = (fl.empty((1, 2, s, 64), dtype=fl.bf16).partition((1, 1, 64, 64)) for _ in range(2))
    dq = fl.empty((1, 4, 256, 64), dtype=fl.bf16).partition((1, 1, 64, 64))
    extra = (0, 0, 1.0) if variant is None else (40, 7, 30.0)
    no = (None, None, None)  # a0, a1, m: absent
    return [
        (KB.make_attention_stats, (lse, delta, q, kv, q, q, *no, 0.125, *extra, 64, 64, 2)),
        (
            KB.make_attention_dkdv,
            (dk, dv, None, q, kv, kv, q, stats, stats, *no, 0.125, *extra, 64, 2),
        ),
        (KB.make_attention_dq, (dq, q, kv, kv, q, stats, stats, *no, 0.125, *extra, 64, 2)),
    ]


@pytest.mark.parametrize(("causal", "even_k"), list(SDPA_IR))
def test_the_sdpa_backward_ir_is_unchanged(causal: bool, even_k: bool) -> None:
    for (make, args), want in zip(
        _backward_launches(None, even_k), SDPA_IR[causal, even_k], strict=True
    ):
        text = make(fl.bf16, causal, even_k).inspect(*args, stage="ir")
        # one kernel serves every form: the plain one takes the variant's scalars too (unread;
        # the absent a0, a1, m compile away), and its body is the IR of before, to the byte
        unread = ", %wl: tile<i32>, %wr: tile<i32>, %cap: tile<f32>"
        assert text.count(unread) == 1, make.__name__
        text = text.replace(unread, "")
        assert hashlib.sha256(text.strip().encode()).hexdigest()[:16] == want, make.__name__


NEW_KERNELS = [  # (causal, variant): what the operators launch; the first has most flags on,
    # the others repeat it with flags off (make test-slow, CI's time limit)
    (True, (True, True, False, True)),  # gemma, causal, L != S
    pytest.param((False, (True, True, True, True)), marks=pytest.mark.slow),  # gemma, not causal
    pytest.param((True, (True, False, False, False)), marks=pytest.mark.slow),  # fmha, L != S
]


@pytest.mark.parametrize("spec", NEW_KERNELS, ids=str)
def test_the_variant_backward_kernels_compile_through_tileiras(
    cubin: Callable[..., bytes], spec: tuple
) -> None:
    causal, variant = spec
    for make, args in _backward_launches(variant, False):
        assert cubin(make(fl.bf16, causal, False, variant), *args), make.__name__


def _opcheck_cases() -> list[tuple[str, Callable[[], tuple]]]:
    def qkv(grad: bool) -> list[Any]:
        q, k, v, _ = _inputs(1, 4, 2, 10, 13, 16, "float32")
        return [t.requires_grad_(grad) for t in (q, k, v)]

    def back(*args: Any) -> Callable[[], tuple]:
        def make() -> tuple:
            q, k, v = qkv(False)
            dout = torch.randn(q.shape)
            return (dout, q, k, v, torch.randn(q.shape), *args)

        return make

    return [
        ("fmha", lambda: (*qkv(True), None, True)),
        ("swa_attention", lambda: (*qkv(True), 3, 0.3, True)),
        ("gemma_attention", lambda: (*qkv(True), None, 2, 4.0, False)),
        ("fmha_backward", back(None, True)),
        ("swa_attention_backward", back(3, None, False)),
        ("gemma_attention_backward", back(0.2, 2, 4.0, True)),
        # training's forward (the bounds as `_attend` takes them) and its backward from lse
        ("attention_window_lse", lambda: (*qkv(True), "gemma_attention", 0.3, True, 2, None, 4.0)),
        ("attention_window_backward", _window_backward_args),
    ]


def _window_backward_args() -> tuple:
    q, k, v, _ = _inputs(1, 4, 2, 10, 13, 16, "float32")
    settings = ("swa_attention", None, True, 3, None, None)
    out, lse = torch.ops.fearless.attention_window_lse(q, k, v, *settings)
    backward_settings = ("swa_attention_backward", *settings[1:])
    return (torch.randn(q.shape), q, k, v, out, lse, *backward_settings)


@pytest.mark.parametrize(
    ("name", "make"), _opcheck_cases(), ids=lambda c: c if isinstance(c, str) else ""
)
def test_torch_library_opcheck(name: str, make: Callable[[], tuple]) -> None:
    """torch's checker of custom ops: schema, fake kernel, autograd registration and AOT
    dispatch, whose gradients it compares with eager's."""
    torch.library.opcheck(getattr(torch.ops.fearless, name).default, make())


def test_torch_compile_forward_and_backward() -> None:
    def block(q: Any, k: Any, v: Any) -> Any:
        return ops.gemma_attention(q, k, v, window_size=3, soft_cap=2.0).square().sum()

    q, k, v, _ = _inputs(1, 2, 1, 10, 12, 16, "float32")
    leaves = [t.requires_grad_() for t in (q, k, v)]
    torch.compile(block, fullgraph=True, backend="aot_eager")(*leaves).backward()
    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    variant_attention(*ref, None, True, 3, None, 2.0).square().sum().backward()
    for got, want in zip(leaves, ref, strict=True):
        assert _rel(got.grad, want.grad) < 4e-5
