"""`fearless.ops.fmha`, `swa_attention` and `gemma_attention` (DESIGN 2c, issue 35): TileGym's
semantics (bottom-right causal alignment, its two window conventions, the logit soft cap)
against a float64 torch reference on the simulator, at ragged shapes and with small tiles (the
skipped key tiles); rows with no key; the refusals; the new kernels through tileiras; the GPU
against torch. Their backward: tests/test_ops_attention_variants_backward.py."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_attention import make_attention

torch = pytest.importorskip("torch")
F = torch.nn.functional
from support.attention_variants_ref import variant_attention as reference  # noqa: E402

TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


def _inputs(b, h, hk, lq, s, d, dtype):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(lq * 1000 + s)
    make = lambda *shape: torch.randn(*shape, generator=g).to(getattr(torch, dtype))  # noqa: E731
    return make(b, h, lq, d), make(b, hk, s, d), make(b, hk, s, d)


def _rel(got, want) -> float:  # type: ignore[no-untyped-def]
    return float((got.double() - want).norm() / want.norm())


def _call(name, q, k, v, kw):  # type: ignore[no-untyped-def]
    """The operator and the reference's arguments for it (TileGym's window conventions)."""
    causal = kw.get("is_causal", True)
    if name == "fmha":
        return ops.fmha(q, k, v, **kw), {"causal": causal}
    if name == "swa":
        w = kw["window_size"]
        return ops.swa_attention(q, k, v, **kw), {"causal": causal, "left": w - 1 if w else None}
    w = kw.get("window_size", 0)
    want = {"causal": causal, "cap": kw.get("soft_cap")}
    if w:
        want.update(left=w, right=None if causal else w)
    return ops.gemma_attention(q, k, v, **kw), want


CASES = [  # (op, (B, H, H_kv, L, S, D), dtype, kwargs)
    ("fmha", (1, 4, 2, 37, 70, 16), "float32", {}),  # GQA, L < S: causal bottom-right
    ("fmha", (1, 2, 2, 70, 37, 40), "bfloat16", {}),  # L > S: 33 rows see no key
    ("fmha", (2, 2, 1, 33, 20, 16), "float16", {"is_causal": False, "scaling": 0.3}),
    ("swa", (1, 2, 2, 40, 40, 16), "float32", {"window_size": 1}),
    ("swa", (1, 4, 2, 30, 45, 16), "float16", {"window_size": 3}),
    ("swa", (1, 2, 1, 45, 30, 16), "float32", {"window_size": 100}),  # wider than S
    ("swa", (1, 2, 2, 30, 45, 32), "bfloat16", {"window_size": 3, "is_causal": False}),
    ("gemma", (1, 2, 2, 40, 40, 16), "float32", {"soft_cap": 2.0}),
    ("gemma", (1, 4, 2, 30, 50, 16), "bfloat16", {"soft_cap": 5.0, "window_size": 3}),
    ("gemma", (1, 2, 2, 50, 30, 16), "float32", {"window_size": 4, "is_causal": False}),
    ("gemma", (1, 2, 1, 20, 20, 16), "float16", {"window_size": 50, "soft_cap": 1.0}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{'-'.join(map(str, c[1]))}-{c[2]}")
def test_matches_the_reference(case: tuple) -> None:
    name, (b, h, hk, lq, s, d), dtype, kw = case
    q, k, v = _inputs(b, h, hk, lq, s, d, dtype)
    got, ref_kw = _call(name, q, k, v, kw)
    want = reference(q, k, v, kw.get("scaling"), **ref_kw)
    assert got.dtype == q.dtype and got.shape == q.shape
    assert torch.isfinite(got).all()
    assert _rel(got, want) < TOL[dtype]


@pytest.mark.parametrize("dtype", ["float8_e5m2", "float8_e4m3fn"])
@pytest.mark.parametrize(
    "shape,causal",
    [((1, 2, 2, 70, 70), True), ((1, 4, 2, 33, 50), False), ((1, 2, 1, 1, 40), False)],
)
def test_fmha_in_fp8(dtype: str, shape: tuple, causal: bool) -> None:
    """TileGym's fmha takes fp8 q, k, v for inference (test_attention.py's float8_e5m2 case,
    f32 reference rounded to fp8, atol 3): the output is fp8, within a few of fp8's steps of
    the f32 reference; with inputs that require grad it is a clear error (no fp8 training)."""
    b, h, hk, lq, s = shape
    g = torch.Generator().manual_seed(lq)
    q, k, v = (
        torch.randn(*dims, 64, generator=g).half().to(getattr(torch, dtype))
        for dims in ((b, h, lq), (b, hk, s), (b, hk, s))
    )
    got = ops.fmha(q, k, v, scaling=0.125, is_causal=causal)
    assert got.dtype == q.dtype and got.shape == q.shape
    want = reference(q.float(), k.float(), v.float(), 0.125, causal=causal)
    step = 0.25 if dtype == "float8_e5m2" else 0.125  # fp8's spacing near 1 to 2, doubled
    assert float((got.float() - want).abs().max()) <= step
    with pytest.raises(fl.FearlessError, match="f32, f16, bf16"):
        ops.fmha(q.float().requires_grad_().to(q.dtype), k, v)


@pytest.mark.parametrize("dt", ["f8e5m2", "f8e4m3fn"])
def test_fp8_kernels_compile_through_tileiras(cubin: Callable[..., bytes], dt: str) -> None:
    """fmha's fp8 kernels for sm_90: the prefill (causal and not; GQA, keys that fill no whole
    tile, D 128) and the one-query decode's split, single-block and combine kernels."""
    from fearless.ops import kernels_attention_decode as ka

    t = getattr(fl, dt)
    q, kv = fl.zeros((2, 4, 256, 128), dtype=t), fl.zeros((2, 2, 200, 128), dtype=t)
    out = fl.empty(q.shape, dtype=t).partition((1, 1, 128, 128))
    for causal in (True, False):
        kernel = make_attention(t, causal, False, None, occupancy=2)
        assert cubin(kernel, out, None, q, kv, kv, None, 0.088, 0, 0, 1.0, 64, 2)
    qd, kvd = fl.zeros((2, 2, 4, 128), dtype=t), fl.zeros((2, 2, 1000, 128), dtype=t)
    part_o = fl.empty((2, 2, 4, 4, 128)).partition((1, 1, 1, 8, 128))
    part_lse = fl.empty((2, 2, 4, 4, 1)).partition((1, 1, 1, 8, 1))
    assert cubin(ka.make_decode_split(t), part_o, part_lse, qd, kvd, kvd, 0.088, 128, 2)
    one = fl.empty((2, 2, 4, 128), dtype=t).partition((1, 1, 8, 128))
    assert cubin(ka.make_decode_one(t), one, qd, kvd, kvd, 0.088, 128)
    partials = fl.zeros((2, 2, 3, 4, 128)), fl.zeros((2, 2, 3, 4, 1))
    assert cubin(ka.make_decode_combine(t), one, *partials, 4)


VARIANTS = [  # (causal, (bottom_right, left, right, softcap), wl, wr, cap): (16, 16) tiles
    (True, (True, False, False, False), 0, 0, 1.0),
    (True, (True, True, False, False), 0, 0, 1.0),  # a window of one key: itself
    (True, (True, True, False, True), 20, 0, 3.0),
    (False, (True, True, True, False), 5, 9, 1.0),
    (False, (False, True, False, False), 17, 0, 1.0),
    (True, (False, True, False, False), 2, 0, 1.0),  # top-left (L == S in the ops)
]


@pytest.mark.parametrize("lq,s", [(70, 90), (90, 70)])
@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_small_tiles_skip_only_tiles_no_row_sees(variant: tuple, lq: int, s: int) -> None:
    """The kernel with (16, 16) tiles, so that many key tiles are skipped or masked on both
    sides of the window (the simulator's autotuner takes the first, 128-row, configuration)."""
    causal, flags, wl, wr, cap = variant
    q, k, v = _inputs(1, 2, 1, lq, s, 16, "float32")
    out = fl.empty((1, 2, lq, 16), dtype=fl.f32)
    kernel = make_attention(fl.f32, causal, s % 16 == 0, None, flags)
    with out.partition((1, 1, 16, 16)) as part:
        fq, fk, fv = (fl.asarray(x.numpy()) for x in (q, k, v))
        kernel(part, None, fq, fk, fv, None, 0.25, wl, wr, cap, 16, 2)
    bounds = (wl if flags[1] else None, wr if flags[2] else None, cap if flags[3] else None)
    want = reference(q, k, v, 0.25, causal, *bounds, aligned=flags[0])
    got = torch.from_numpy(out.numpy())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_the_causal_mask_is_bottom_right_aligned() -> None:
    """TileGym's and flash-attn's: with L < S query i sees keys 0..i + S - L (torch's
    is_causal sees 0..i); with L > S the first L - S queries see no key and give 0."""
    q, k, v = _inputs(1, 1, 1, 3, 8, 16, "float32")
    diag = torch.ones(3, 8, dtype=torch.bool).tril(8 - 3)
    got = ops.fmha(q, k, v)
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=diag)
    assert _rel(got, want) < 1e-5
    torch_causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert _rel(got, torch_causal.double()) > 1e-2
    q, k, v = _inputs(1, 1, 1, 9, 4, 16, "float32")
    got = ops.fmha(q, k, v)
    assert torch.equal(got[0, 0, :5], torch.zeros(5, 16))
    want = F.scaled_dot_product_attention(
        q[:, :, 5:].double(), k.double(), v.double(), is_causal=True
    )
    assert _rel(got[:, :, 5:], want) < 1e-5


def test_rows_outside_every_window_give_zeros_and_no_keys_give_zeros() -> None:
    q, k, v = _inputs(1, 2, 2, 12, 4, 16, "float32")  # rows 0..7 sit before key 0
    for got in (
        ops.swa_attention(q, k, v, 2),
        ops.gemma_attention(q, k, v, window_size=2, soft_cap=3.0),
    ):
        assert torch.isfinite(got).all()
        assert torch.equal(got[:, :, :8], torch.zeros(1, 2, 8, 16))
    q, k, v = _inputs(1, 2, 2, 5, 0, 16, "float32")
    assert torch.equal(ops.fmha(q, k, v), torch.zeros(1, 2, 5, 16))


def test_fl_tensors_numpy_and_torch_ops() -> None:
    q, k, v = _inputs(1, 2, 1, 20, 24, 16, "float32")
    want = reference(q, k, v, None, True, 2)
    np_out = ops.swa_attention(q.numpy(), k.numpy(), v.numpy(), 3)
    assert isinstance(np_out, np.ndarray)
    np.testing.assert_allclose(np_out, want.numpy(), rtol=1e-5, atol=1e-5)
    fl_out = ops.swa_attention(*(fl.asarray(x.numpy()) for x in (q, k, v)), window_size=3)
    assert isinstance(fl_out, fl.Tensor)
    np.testing.assert_allclose(fl_out.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    got = torch.ops.fearless.swa_attention(q, k, v, 3)
    assert _rel(got, want) < 1e-5
    got = torch.ops.fearless.gemma_attention(q, k, v, None, 2, 4.0, False)
    assert _rel(got, reference(q, k, v, None, False, 2, 2, 4.0)) < 1e-5
    got = torch.ops.fearless.fmha(q, k, v, 0.5, True)
    assert _rel(got, reference(q, k, v, 0.5, True)) < 1e-5


def test_fake_implementations_and_torch_compile() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q, k = torch.empty(2, 4, 10, 16), torch.empty(2, 2, 12, 16)
        for out in (
            torch.ops.fearless.fmha(q, k, k),
            torch.ops.fearless.swa_attention(q, k, k, 4),
            torch.ops.fearless.gemma_attention(q, k, k, None, 0, 30.0, True),
        ):
            assert out.shape == q.shape and out.dtype == q.dtype

    def block(q, k, v):  # type: ignore[no-untyped-def]
        return ops.gemma_attention(q, k, v, window_size=3, soft_cap=2.0)

    q, k, v = _inputs(1, 2, 1, 10, 12, 16, "float32")
    got = torch.compile(block, fullgraph=True, backend="aot_eager")(q, k, v)
    assert _rel(got, reference(q, k, v, None, True, 3, None, 2.0)) < 1e-5


def test_refusals_are_fearless_errors() -> None:
    q, k, v = _inputs(1, 4, 2, 6, 6, 16, "float32")
    with pytest.raises(fl.KernelTypeError, match="window_size an int of 0 or more"):
        ops.swa_attention(q, k, v, -1)
    with pytest.raises(fl.KernelTypeError, match="window_size an int of 0 or more"):
        ops.gemma_attention(q, k, v, window_size=-2)
    for cap in (0.0, -1.0, math.inf):
        with pytest.raises(fl.KernelTypeError, match="soft_cap above 0"):
            ops.gemma_attention(q, k, v, soft_cap=cap)
    _, k3, v3 = _inputs(1, 3, 3, 6, 6, 16, "float32")  # 4 query heads over 3
    with pytest.raises(fl.KernelTypeError, match="H a multiple of H_kv"):
        ops.fmha(q, k3, v3)
    with pytest.raises(fl.KernelTypeError, match="dtypes"):
        ops.fmha(q, k.half(), v.half())
    with pytest.raises(fl.KernelTypeError, match="shapes"):
        ops.fmha(q, k[..., :8], v)
    with pytest.raises(fl.KernelTypeError, match="shapes"):
        ops.fmha(q[0], k[0], v[0])
    with torch.no_grad():
        assert ops.fmha(q, k, v).shape == q.shape


# sha256 (first 16 hex digits) of the Tile IR text of the sdpa forward's kernel (bf16, q of
# (1, 4, 256, 64), k/v of (1, 2, S, 64), 128 x 64 tiles) as it was when the plain, masked and
# variant kernels were three: a change here changes scaled_dot_product_attention's speed. Per
# (causal, even_k): without a mask, with a bool mask of (1, H, L, S), with a float one of
# (B, 1, L, S). Last changed 2026-12-07, on purpose: a masked score (causal, past S, a bool
# mask's False) is replaced by -inf, `where(keep, s, -inf)`, not added -inf, so that a NaN or
# Inf key no row sees reaches no row (tests/test_ops_attention_masked_keys.py); the unmasked
# forms of (False, True) are as they were.
SDPA_FORWARD_IR = {
    (False, False): ("bf393316f5c1c246", "a331f04b5dbc2c04", "a895b9f6ebbaedf0"),
    (False, True): ("a6ada1f7446c36ab", "1dc1eb28f6abb880", "710f05f319d0e7c6"),
    (True, False): ("249eb242a166b84e", "204fea57ec2e65bc", "f17dd5a30a389d2c"),
    (True, True): ("223fa7385aa7c3ca", "ecd392e78f6b85f0", "c9a5b9237d8bb04b"),
}
MASK_FORMS = (None, (True, False, True), (False, True, False))


@pytest.mark.parametrize(("causal", "even_k"), list(SDPA_FORWARD_IR))
def test_the_sdpa_forward_ir_is_unchanged(causal: bool, even_k: bool) -> None:
    s = 256 if even_k else 200
    q = fl.zeros((1, 4, 256, 64), dtype=fl.bf16)
    kv = fl.zeros((1, 2, s, 64), dtype=fl.bf16)
    out = fl.empty(q.shape, dtype=fl.bf16).partition((1, 1, 128, 64))
    for form, want in zip(MASK_FORMS, SDPA_FORWARD_IR[causal, even_k], strict=True):
        mask = None
        if form is not None:
            shape = (2 if form[1] else 1, 4 if form[2] else 1, 256, s)
            mask = fl.zeros(shape, dtype=fl.bool_ if form[0] else fl.bf16)
        text = make_attention(fl.bf16, causal, even_k, form).inspect(
            out, None, q, kv, kv, mask, 0.125, 0, 0, 1.0, 64, 2, stage="ir"
        )
        # one kernel serves every form: the plain and masked ones take the variant's scalars
        # too (unread; an absent m compiles away), and their body is the IR of before, to the
        # byte (the masked form's kernel was named masked_attention)
        unread = ", %wl: tile<i32>, %wr: tile<i32>, %cap: tile<f32>"
        assert text.count(unread) == 1, form
        text = text.replace(unread, "")
        if form is not None:
            text = text.replace("@attention(", "@masked_attention(", 1)
        assert hashlib.sha256(text.strip().encode()).hexdigest()[:16] == want, form


NEW_KERNELS = [  # (causal, variant): what the operators launch
    (True, (True, False, False, False)),  # fmha, L != S
    (True, (True, True, False, False)),  # swa
    (False, (True, True, False, False)),  # swa, not causal
    (True, (False, True, False, True)),  # gemma, L == S
    (False, (True, True, True, True)),  # gemma, not causal
]


@pytest.mark.parametrize("even_k", [False, True])
@pytest.mark.parametrize("spec", NEW_KERNELS, ids=str)
def test_the_variant_kernels_compile_through_tileiras(
    cubin: Callable[..., bytes], spec: tuple, even_k: bool
) -> None:
    causal, variant = spec
    q = fl.zeros((2, 4, 256, 64), dtype=fl.bf16)
    kv = fl.zeros((2, 2, 256 if even_k else 200, 64), dtype=fl.bf16)
    out = fl.empty(q.shape, dtype=fl.bf16).partition((1, 1, 128, 64))
    kernel = make_attention(fl.bf16, causal, even_k, None, variant, occupancy=2)
    assert cubin(kernel, out, None, q, kv, kv, None, 0.125, 64, 64, 50.0, 128, 2)


@pytest.mark.gpu
def test_gpu_matches_torch() -> None:
    ok, why = fl.cuda_status()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    fl.set_target("cuda")
    try:
        for name, (b, h, hk, lq, s, d), dtype, kw in CASES:
            q, k, v = (t.cuda() for t in _inputs(b, h, hk, lq, s, d, dtype))
            got, ref_kw = _call(name, q, k, v, kw)
            want = reference(q.cpu(), k.cpu(), v.cpu(), kw.get("scaling"), **ref_kw)
            assert got.is_cuda and _rel(got.cpu(), want) < TOL[dtype], (name, lq, s, kw)
        q, k, v = (t.cuda() for t in _inputs(2, 8, 2, 1000, 1500, 128, "bfloat16"))
        for w in (1, 100, 4096):
            got = ops.swa_attention(q, k, v, w)
            i = torch.arange(1000, device="cuda")[:, None] + 500
            j = torch.arange(1500, device="cuda")[None, :]
            mask = (j <= i) & (j > i - w)
            want = F.scaled_dot_product_attention(
                q.double(), k.double(), v.double(), attn_mask=mask, enable_gqa=True
            )
            assert _rel(got, want) < TOL["bfloat16"], w
    finally:
        fl.set_target(None)
