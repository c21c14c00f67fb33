"""`fearless.ops.fmha_varlen` and `fmha_decode` (DESIGN 2c): TileGym's semantics (a padded
batch of sequences with their own query and key lengths, causal bottom-right per sequence, GQA;
single-token decode split across the keys) against a float64 NumPy reference on the
simulator, at ragged shapes (lengths 0 and 1, not multiples of the tile, L != S per sequence),
with small tiles; sequences never see each other's keys; the torch operators and their fake
kernels; the refusals; the kernels through tileiras."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops.kernels_attention_varlen import make_varlen_attention
from support.attention_varlen_ref import fmha_decode_reference, fmha_varlen_reference

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


def _inputs(b, h, hk, lq, s, d, dtype, seed=0):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(seed + lq * 1000 + s)
    make = lambda *shape: torch.randn(*shape, generator=gen).to(getattr(torch, dtype))  # noqa: E731
    return make(b, h, lq, d), make(b, hk, s, d), make(b, hk, s, d)


def _np(*xs):  # type: ignore[no-untyped-def]
    return [x.float().numpy() for x in xs]


def _rel(got, want: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    got = np.asarray(got.float().numpy() if hasattr(got, "float") else got, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


CASES = [  # ((B, H, H_kv, L, S, D), dtype, causal, q_lens, kv_lens, scaling)
    ((3, 4, 2, 13, 21, 16), "float32", True, [5, 0, 13], [9, 4, 1], None),  # q > kv in seq 2
    ((3, 4, 2, 13, 21, 16), "float32", False, [5, 1, 13], [9, 21, 0], 0.3),  # kv 0: zeros
    ((2, 2, 2, 150, 140, 32), "float32", True, [150, 77], [140, 139], None),  # > one tile
    ((2, 8, 1, 40, 40, 16), "float32", True, None, [17, 40], None),  # MQA, q_lens None
    ((2, 4, 4, 33, 50, 16), "float32", True, [33, 2], None, 0.2),  # kv_lens None
    ((2, 4, 2, 30, 45, 40), "float16", True, [1, 29], [45, 30], None),  # D not a power of two
    ((3, 4, 2, 64, 64, 64), "bfloat16", False, [64, 31, 1], [1, 64, 63], None),
    ((1, 2, 1, 20, 20, 16), "float32", True, None, None, None),  # no lengths: fmha
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, (*c[0], *c[1:3]))))
def test_matches_the_reference(case: tuple) -> None:
    shape, dtype, causal, ql, kl, scaling = case
    q, k, v = _inputs(*shape, dtype)
    got = ops.fmha_varlen(q, k, v, scaling, causal, ql, kl)
    want = fmha_varlen_reference(*_np(q, k, v), scaling, causal, ql, kl)
    assert got.dtype == q.dtype and got.shape == q.shape
    assert torch.isfinite(got).all()
    assert _rel(got, want) < TOL[dtype]
    if ql is not None:  # the padded rows are 0
        for b, n in enumerate(ql):
            assert torch.equal(got[b, :, n:], torch.zeros_like(got[b, :, n:]))


def test_without_lengths_it_is_fmha() -> None:
    q, k, v = _inputs(2, 4, 2, 37, 70, 16, "float32")
    for causal in (True, False):
        want = ops.fmha(q, k, v, None, causal)
        got = ops.fmha_varlen(q, k, v, None, causal)
        assert _rel(got, want.double().numpy()) < 1e-5


def test_sequences_see_only_their_own_keys() -> None:
    """Changing sequence 1's keys (and the padding past sequence 0's length) leaves sequence
    0's output as it was."""
    q, k, v = _inputs(2, 2, 2, 10, 16, 16, "float32")
    ql, kl = [7, 10], [9, 16]
    base = ops.fmha_varlen(q, k, v, None, False, ql, kl)
    k2, v2 = k.clone(), v.clone()
    k2[1], v2[1] = 100.0, -100.0
    k2[0, :, 9:], v2[0, :, 9:] = 50.0, 50.0
    got = ops.fmha_varlen(q, k2, v2, None, False, ql, kl)
    assert torch.equal(got[0], base[0])
    assert not torch.equal(got[1], base[1])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("ql,kl", [([70, 5], [90, 40]), ([90, 33], [70, 17]), ([0, 1], [1, 0])])
def test_small_tiles(causal: bool, ql: list, kl: list) -> None:
    """The kernel with (16, 16) tiles, so that blocks past a sequence's length, skipped and
    partly masked key tiles all occur (the simulator's autotuner takes 128-row tiles)."""
    q, k, v = _inputs(2, 4, 2, 90, 90, 16, "float32")
    out = fl.empty((2, 4, 90, 16), dtype=fl.f32)
    kernel = make_varlen_attention(fl.f32, causal)
    fq, fk, fv = (fl.asarray(x.numpy()) for x in (q, k, v))
    fql, fkl = (fl.asarray(np.array(x, np.int32)) for x in (ql, kl))
    with out.partition((1, 1, 16, 16)) as part:
        kernel(part, fq, fk, fv, fql, fkl, 0.25, 16, 2)
    want = fmha_varlen_reference(*_np(q, k, v), 0.25, causal, ql, kl)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def _poisoned(x, lens, value):  # type: ignore[no-untyped-def]
    """x (B, H, N, D) with every position of sequence b at or past lens[b] set to `value`."""
    x = x.clone()
    for b, n in enumerate(lens):
        x[b, :, n:] = value
    return x


# lengths inside a 16-row tile (20, 27, 37, 45), one on a tile's edge (32), 0 and the whole L
PADDED = ([20, 32, 0], [27, 45, 37])


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("causal", [False, True])
def test_the_padding_never_reaches_the_output(causal: bool, value: float) -> None:
    """NaN or Inf in the padded query rows and in the keys and values past each sequence's
    length (torch.empty memory) leave the output bit for bit that of clean padding: with
    (16, 16) tiles, so that a length falls inside a key tile, and through the operator."""
    ql, kl = PADDED
    q, k, v = _inputs(3, 4, 2, 40, 48, 16, "float32")
    dirty = _poisoned(q, ql, value), _poisoned(k, kl, value), _poisoned(v, kl, value)
    kernel = make_varlen_attention(fl.f32, causal)
    fql, fkl = (fl.asarray(np.array(x, np.int32)) for x in (ql, kl))
    outs = []
    for qkv in ((q, k, v), dirty):
        out = fl.empty(q.shape, dtype=fl.f32)
        with out.partition((1, 1, 16, 16)) as part:
            kernel(part, *(fl.asarray(x.numpy()) for x in qkv), fql, fkl, 0.25, 16, 2)
        outs.append(out.numpy())
        outs.append(ops.fmha_varlen(*qkv, 0.25, causal, ql, kl).numpy())
    want = fmha_varlen_reference(*_np(q, k, v), 0.25, causal, ql, kl)
    np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(outs[2], outs[0])  # (16, 16) tiles
    np.testing.assert_array_equal(outs[3], outs[1])  # the operator's


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("atomic", [True, False], ids=["atomic-dq", "dq-kernel"])
def test_the_padding_never_reaches_the_gradients(
    causal: bool, value: float, atomic: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backward (16-row tiles, both dQ forms): NaN or Inf in the padded rows of q and of
    the incoming gradient and past each sequence's keys in k and v leave dq, dk and dv bit for
    bit those of clean padding, 0 in the padded rows and keys."""
    from fearless.ops import kernels_attention_backward as KB

    monkeypatch.setattr(KB, "BACKWARD_TILES", (16, 16))
    monkeypatch.setattr(KB, "DQ_BY_ATOMICS_UP_TO", 64 if atomic else 0)
    ql, kl = PADDED
    q, k, v = _inputs(3, 4, 2, 40, 48, 16, "float32")
    dout = _inputs(3, 4, 2, 40, 48, 16, "float32", seed=1)[0]
    dirty = [_poisoned(x, n, value) for x, n in ((q, ql), (k, kl), (v, kl), (dout, ql))]
    grads = []
    for *qkv, do in ((q, k, v, dout), dirty):
        leaves = [x.clone().requires_grad_() for x in qkv]
        ops.fmha_varlen(*leaves, 0.25, causal, ql, kl).backward(do)
        grads.append([x.grad for x in leaves])
    for what, clean, got in zip(("dq", "dk", "dv"), *grads, strict=True):
        assert torch.isfinite(clean).all(), what
        assert torch.equal(got, clean), what
    dq, dk, dv = grads[1]
    for b, (nq, nk) in enumerate(zip(ql, kl, strict=True)):
        assert not dq[b, :, nq:].any() and not dk[b, :, nk:].any() and not dv[b, :, nk:].any()


def test_lengths_as_tensors_numpy_and_fl_tensors() -> None:
    q, k, v = _inputs(3, 4, 2, 20, 30, 16, "float32")
    ql, kl = [20, 3, 11], [30, 0, 12]
    want = fmha_varlen_reference(*_np(q, k, v), None, True, ql, kl)
    for conv in (
        lambda x: torch.tensor(x, dtype=torch.int32),
        lambda x: torch.tensor(x),  # int64
        lambda x: np.array(x, np.int64),
        tuple,
    ):
        assert _rel(ops.fmha_varlen(q, k, v, None, True, conv(ql), conv(kl)), want) < 1e-5
    np_out = ops.fmha_varlen(q.numpy(), k.numpy(), v.numpy(), q_lens=ql, kv_lens=kl)
    assert isinstance(np_out, np.ndarray)
    np.testing.assert_allclose(np_out, want, rtol=1e-5, atol=1e-5)
    fl_args = [fl.asarray(x.numpy()) for x in (q, k, v)]
    fl_lens = [fl.asarray(np.array(x, np.int32)) for x in (ql, kl)]
    fl_out = ops.fmha_varlen(*fl_args, q_lens=fl_lens[0], kv_lens=fl_lens[1])
    assert isinstance(fl_out, fl.Tensor)
    np.testing.assert_allclose(fl_out.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize(
    "s,group,split", [(9, 1, None), (119, 4, None), (300, 8, 16), (256, 4, 64)]
)
def test_decode_matches_the_reference(dtype: str, s: int, group: int, split: object) -> None:
    q, k, v = _inputs(2, 8, 8 // group, 1, s, 64, dtype)
    got = ops.fmha_decode(q, k, v, 0.125, split)
    assert got.shape == (2, 8, 1, 64) and got.dtype == q.dtype
    assert _rel(got, fmha_decode_reference(*_np(q, k, v), 0.125)) < TOL[dtype]
    got = ops.fmha_decode(q, k, v, None, split)  # sm_scale None: 1 / sqrt(D)
    assert _rel(got, fmha_decode_reference(*_np(q, k, v), None)) < TOL[dtype]


def test_torch_operators_fake_kernels_and_compile() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    q, k, v = _inputs(2, 4, 2, 10, 12, 16, "float32")
    ql, kl = torch.tensor([10, 4], dtype=torch.int32), torch.tensor([3, 12], dtype=torch.int32)
    want = fmha_varlen_reference(*_np(q, k, v), 0.2, True, [10, 4], [3, 12])
    assert _rel(torch.ops.fearless.fmha_varlen(q, k, v, 0.2, True, ql, kl), want) < 1e-5
    got = torch.ops.fearless.fmha_decode(q[:, :, :1], k, v, 0.2, None)
    assert _rel(got, fmha_decode_reference(*_np(q[:, :, :1], k, v), 0.2)) < 1e-5
    with FakeTensorMode():
        fq, fk = torch.empty(2, 4, 7, 16), torch.empty(2, 2, 9, 16)
        fl_ = torch.zeros(2, dtype=torch.int32)
        assert torch.ops.fearless.fmha_varlen(fq, fk, fk, None, True, fl_, fl_).shape == fq.shape
        assert torch.ops.fearless.fmha_decode(fq[:, :, :1], fk, fk, None).shape == (2, 4, 1, 16)

    def block(q, k, v):  # type: ignore[no-untyped-def]
        return ops.fmha_varlen(q, k, v, 0.2, True, ql, kl)

    got = torch.compile(block, fullgraph=True, backend="aot_eager")(q, k, v)
    assert _rel(got, want) < 1e-5


def test_refusals_are_fearless_errors() -> None:
    q, k, v = _inputs(2, 4, 2, 6, 8, 16, "float32")
    with pytest.raises(fl.KernelTypeError, match=r"`q_lens` .* one length per sequence, 2"):
        ops.fmha_varlen(q, k, v, q_lens=[1, 2, 3])
    with pytest.raises(fl.KernelTypeError, match=r"`kv_lens` .* one length per sequence, 2"):
        ops.fmha_varlen(q, k, v, kv_lens=torch.tensor([1]))
    with pytest.raises(fl.KernelTypeError, match=r"`q_lens\[1\]` .* is -1, outside 0..6"):
        ops.fmha_varlen(q, k, v, q_lens=[2, -1])
    with pytest.raises(fl.KernelTypeError, match=r"`kv_lens\[0\]` .* is 9, outside 0..8"):
        ops.fmha_varlen(q, k, v, kv_lens=np.array([9, 1]))
    with pytest.raises(fl.KernelTypeError, match=r"`q_lens` .* must hold integers"):
        ops.fmha_varlen(q, k, v, q_lens=[1.5, 2])
    with pytest.raises(fl.KernelTypeError, match=r"`q_lens` .* int32 or int64 tensor, got f32"):
        ops.fmha_varlen(q, k, v, q_lens=torch.tensor([1.0, 2.0]))
    with pytest.raises(fl.KernelTypeError, match="shapes"):
        ops.fmha_varlen(q, k[:1], v[:1])  # batch counts differ
    with pytest.raises(fl.KernelTypeError, match="shapes"):
        ops.fmha_varlen(q[:, :3], k, v)  # H not a multiple of H_kv
    with pytest.raises(fl.KernelTypeError, match="dtypes"):
        ops.fmha_varlen(q, k.half(), v.half())
    with pytest.raises(fl.KernelTypeError, match="takes one query token"):
        ops.fmha_decode(q.detach(), k, v, 0.1)
    with pytest.raises(fl.KernelTypeError, match="kv_len_per_split None or a power of two"):
        ops.fmha_decode(q.detach()[:, :, :1], k, v, 0.1, 100)
    with pytest.raises(fl.KernelTypeError, match="kv_len_per_split None or a power of two"):
        ops.fmha_decode(q.detach()[:, :, :1], k, v, 0.1, 8)
    with pytest.raises(fl.KernelTypeError, match="has no backward yet"):
        ops.fmha_decode(q[:, :, :1].clone().requires_grad_(), k, v, 0.1)


def test_lengths_on_the_host_are_checked_in_every_form() -> None:
    """Lengths the host can read are range-checked whatever holds them: an fl.Tensor on the
    simulator (host memory, as NumPy is) as much as a list, NumPy or a CPU torch tensor; only
    lengths on a GPU are left to the kernel's clamp. A list of NumPy integers (`list(arr)`)
    holds integers."""
    q, k, v = _inputs(2, 4, 2, 6, 8, 16, "float32")
    qn, kn, vn = _np(q, k, v)
    for form in (
        lambda x: fl.asarray(np.array(x, np.int32)),
        lambda x: np.array(x, np.int64),
        lambda x: torch.tensor(x),
        lambda x: list(np.array(x, np.int64)),
        lambda x: tuple(np.array(x, np.int32)),
    ):
        with pytest.raises(fl.KernelTypeError, match=r"`q_lens\[0\]` .* is 100, outside 0..6") as e:
            ops.fmha_varlen(qn, kn, vn, q_lens=form([100, 3]))
        assert e.value.code == "E0701" and __file__ in str(e.value)
        with pytest.raises(fl.KernelTypeError, match=r"`kv_lens\[0\]` .* is -5, outside 0..8"):
            ops.fmha_varlen(q, k, v, kv_lens=form([-5, 3]))
    want = fmha_varlen_reference(qn, kn, vn, None, True, [4, 6], [8, 2])
    got = ops.fmha_varlen(qn, kn, vn, q_lens=list(np.array([4, 6])), kv_lens=(np.int32(8), 2))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(fl.KernelTypeError, match=r"`q_lens` .* must hold integers, got np.True_"):
        ops.fmha_varlen(q, k, v, q_lens=[np.True_, 2])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_the_varlen_kernel_compiles_through_tileiras(
    cubin: Callable[..., bytes], causal: bool, dtype: str
) -> None:
    dt = getattr(fl, dtype)
    q = fl.zeros((2, 16, 200, 64), dtype=dt)
    kv = fl.zeros((2, 4, 300, 64), dtype=dt)
    out = fl.empty(q.shape, dtype=dt).partition((1, 1, 128, 64))
    lens = fl.zeros((2,), dtype=fl.i32)
    kernel = make_varlen_attention(dt, causal, occupancy=2)
    assert cubin(kernel, out, q, kv, kv, lens, lens, 0.125, 128, 4)
