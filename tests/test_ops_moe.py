"""`fearless.ops.moe_align_block_size` and `fused_moe` (DESIGN 2c): TileGym's semantics against
NumPy references (tests/support/moe_ref.py) on the simulator: the alignment exactly (slot
order, sentinel padding, per-block experts, cumsum, counts), the MoE in float64 at small ragged
shapes (experts with no token, repeated experts in a row, blocks of 16 and 32 sorted slots,
f32 / f16 / bf16); padded slots reach nothing outside their own rows; the torch operators and
their fake kernels; the refusals; the kernels through tileiras."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops._io import operand, view
from fearless.ops.kernels_moe import (
    gate_up_tuned,
    make_moe_down,
    make_moe_gate_up,
    make_moe_place,
    make_moe_sum,
)
from fearless.ops.moe import _align, _fused_moe
from support.moe_ref import fused_moe_reference, moe_align_reference

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-5, "float16": 5e-3, "bfloat16": 2e-2}


def _check_align(ids: np.ndarray, block: int, experts: int) -> None:
    got = ops.moe_align_block_size(ids, block, experts)
    want = moe_align_reference(ids, block, experts)
    assert [g.dtype for g in got] == [np.int32] * 5
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[2].shape == (1,) and int(got[2][0]) == want[2]
    np.testing.assert_array_equal(got[3], want[3])
    assert got[4].shape == (1,) and int(got[4][0]) == want[4]


@pytest.mark.parametrize(
    ("tokens", "topk", "experts", "block"),
    [(1, 1, 4, 16), (7, 2, 8, 4), (33, 2, 8, 16), (20, 1, 5, 32), (600, 2, 6, 16), (9, 2, 3, 5)],
)
def test_align_matches_the_reference_exactly(
    tokens: int, topk: int, experts: int, block: int
) -> None:
    rng = np.random.default_rng(tokens * 31 + experts)
    ids = rng.integers(0, experts, (tokens, topk))
    ids[ids == 1] = 0  # expert 1 gets no slot
    _check_align(ids, block, experts)  # 600 x 2: two chunks of 1024 slots; block 5: not 2^k


def test_align_of_tilegyms_docstring_example() -> None:
    """TileGym's example (4 tokens, top 3, block 4), its ids in 1..4 taken as 0..3."""
    ids = np.array([[2, 3, 4], [1, 2, 4], [1, 3, 4], [1, 2, 3]]) - 1
    got = ops.moe_align_block_size(torch.from_numpy(ids), 4, 4)
    assert got[0][:16].tolist() == [3, 6, 9, 12, 0, 4, 10, 12, 1, 7, 11, 12, 2, 5, 8, 12]
    assert got[2].tolist() == [16] and got[3].tolist() == [0, 4, 8, 12, 16]
    assert got[4].tolist() == [3] and got[1][:4].tolist() == [0, 1, 2, 3]
    assert isinstance(got[0], torch.Tensor) and got[0].dtype == torch.int32


def test_align_with_no_token_and_fl_tensors() -> None:
    got = ops.moe_align_block_size(np.zeros((0, 2), np.int64), 8, 3)
    assert (got[0] == 0).all() and got[0].shape == (21,) and (got[1] == -1).all()
    assert got[2].tolist() == [0] and got[3].tolist() == [0] * 4 and got[4].tolist() == [0]
    ids = fl.asarray(np.array([[2, 0], [2, 1]], np.int32))
    got = ops.moe_align_block_size(ids, 2, 3)
    assert isinstance(got[0], fl.Tensor) and got[0].numpy()[:6].tolist() == [1, 4, 3, 4, 0, 2]


def _inputs(tokens, hidden, inter, experts, topk, dtype, seed=0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed + tokens * 100 + experts)
    x = rng.normal(0, 0.5, (tokens, hidden))
    w1 = rng.normal(0, 0.1, (experts, 2 * inter, hidden))
    w2 = rng.normal(0, 0.1, (experts, hidden, inter))
    ids = np.stack([rng.permutation(experts)[:topk] for _ in range(tokens)]).reshape(tokens, topk)
    ids[ids == experts - 1] = 0 if topk == 1 else ids[ids == experts - 1]  # an idle expert
    logits = rng.normal(size=(tokens, topk))
    weights = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    cast = lambda a: torch.from_numpy(a).to(getattr(torch, dtype))  # noqa: E731
    return cast(x), cast(w1), cast(w2), cast(weights), torch.from_numpy(ids)


def _rel(got, want: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    got = np.asarray(got.float().numpy() if hasattr(got, "float") else got, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def _ref(x, w1, w2, weights, ids):  # type: ignore[no-untyped-def]
    return fused_moe_reference(*(t.float().numpy() for t in (x, w1, w2, weights)), ids.numpy())


CASES = [  # (tokens, hidden, intermediate, experts, top_k), dtype, block
    ((1, 32, 32, 4, 1), "float32", 16),
    ((5, 32, 64, 8, 2), "float32", 16),
    ((17, 64, 32, 4, 2), "float32", 32),
    ((33, 64, 64, 8, 2), "float32", 16),  # three blocks for some experts
    ((33, 48, 40, 6, 1), "float32", 16),  # H and I not powers of two: padded tiles
    ((13, 64, 32, 8, 2), "float16", 16),
    ((33, 32, 64, 4, 2), "bfloat16", 32),
    ((24, 64, 64, 8, 1), "bfloat16", None),  # the block chosen from the shapes
    ((2, 32, 32, 16, 4), "float32", 16),  # a decode step: fewer slots than experts
    ((1, 32, 64, 32, 8), "bfloat16", None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, (*c[0], *c[1:]))))
def test_fused_moe_matches_the_reference(case: tuple) -> None:
    shape, dtype, block = case
    args = _inputs(*shape, dtype)
    got = _fused_moe(*args, block)
    assert got.shape == args[0].shape and got.dtype == args[0].dtype
    assert _rel(got, _ref(*args)) < TOL[dtype]


def test_fused_moe_public_call_kinds_and_repeated_experts() -> None:
    """The public call on torch, NumPy and fl.Tensors; a row that names one expert twice adds
    it twice (each (token, k) slot has its own row), as TileGym's reference."""
    x, w1, w2, weights, ids = _inputs(9, 32, 32, 4, 2, "float32")
    ids[:, 1] = ids[:, 0]  # every token: its expert twice
    want = _ref(x, w1, w2, weights, ids)
    assert _rel(ops.fused_moe(x, w1, w2, weights, ids), want) < 1e-5
    nps = [t.numpy() for t in (x, w1, w2, weights, ids)]
    got = ops.fused_moe(*nps)
    assert isinstance(got, np.ndarray) and _rel(got, want) < 1e-5
    got = ops.fused_moe(*(fl.asarray(a) for a in nps))
    assert isinstance(got, fl.Tensor) and _rel(got.numpy(), want) < 1e-5
    one = ops.fused_moe(x, w1, w2, weights.sum(1, keepdim=True), ids[:, :1])
    assert _rel(one, want) < 1e-5  # the two slots of one expert sum as one of their weight


def test_padded_slots_touch_nothing_outside_their_rows() -> None:
    """NaN in every hidden row but token 0's; token 0 goes to expert 2, the others to expert 3.
    In the sorted intermediate, expert 2's block holds token 0's slot and 15 sentinels: the
    sentinels' rows are exactly 0 (they read no token's row: any would bring NaN) and token
    0's row is finite; in the output only the NaN tokens' own rows are NaN."""
    x, w1, w2, weights, ids = _inputs(6, 32, 32, 4, 1, "float32")
    x[1:] = float("nan")
    ids[:] = 3
    ids[0] = 2
    xa = operand(x, "t", "x")
    sorted_ids, expert_ids, post, _, _, _ = (
        t for t, _ in _align("t", operand(ids, "t", "i"), 16, 4)
    )
    assert sorted_ids.numpy()[:32].tolist() == [0] + [6] * 15 + [1, 2, 3, 4, 5] + [6] * 11
    inter = fl.full((sorted_ids.shape[0], 32), 7.0, dtype=fl.f32)
    w1v = view(operand(w1, "t", "w1").tensor, (4, 2, 32, 32))
    gate_up_tuned(inter, xa.tensor, w1v, sorted_ids, expert_ids, post, 1, 16)
    rows = inter.numpy()
    assert np.isfinite(rows[0]).all() and (rows[1:16] == 0).all()
    assert np.isnan(rows[16:21]).all() and (rows[21:] == 0).all()  # past the total: zeros
    got = _fused_moe(x, w1, w2, weights, ids, 16)
    assert torch.isfinite(got[0]).all() and torch.isnan(got[1:]).all()
    assert _rel(got[:1], _ref(x[:1], w1, w2, weights[:1], ids[:1])) < 1e-5


def test_torch_operators_fake_kernels_and_compile() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    x, w1, w2, weights, ids = _inputs(7, 32, 32, 4, 2, "float32")
    want = _ref(x, w1, w2, weights, ids)
    assert _rel(torch.ops.fearless.fused_moe(x, w1, w2, weights, ids), want) < 1e-5
    got = torch.ops.fearless.moe_align_block_size(ids, 16, 4)
    ref = moe_align_reference(ids.numpy(), 16, 4)
    assert got[0].tolist() == ref[0].tolist() and got[2].tolist() == [ref[2]]
    with FakeTensorMode():
        fx, fw1, fw2 = torch.empty(5, 64), torch.empty(3, 32, 64), torch.empty(3, 64, 16)
        fw, fids = torch.empty(5, 2), torch.zeros(5, 2, dtype=torch.int64)
        assert torch.ops.fearless.fused_moe(fx, fw1, fw2, fw, fids).shape == (5, 64)
        shapes = [t.shape for t in torch.ops.fearless.moe_align_block_size(fids, 4, 3)]
        assert shapes == [(19,), (5,), (1,), (4,), (1,)]

    def block(x, w1, w2, weights, ids):  # type: ignore[no-untyped-def]
        return ops.fused_moe(x, w1, w2, weights, ids)

    got = torch.compile(block, fullgraph=True, backend="aot_eager")(x, w1, w2, weights, ids)
    assert _rel(got, want) < 1e-5


def test_refusals_are_fearless_errors() -> None:
    x, w1, w2, weights, ids = _inputs(4, 32, 32, 4, 2, "float32")
    bad = ids.clone()
    bad[2, 1] = 4
    line = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]
    with pytest.raises(fl.KernelIndexError, match=r"`topk_ids\[2, 1\]` .* is 4, outside 0..3") as e:
        ops.fused_moe(x, w1, w2, weights, bad)  # on the simulator: before the GEMMs launch
    assert e.value.code == "E0600" and "experts" in str(e.value)
    assert "1 id(s) out of range" in str(e.value)
    assert e.value.loc is not None and e.value.loc.line == line
    bad[2, 1] = -1
    bad[3, 0] = 7
    with pytest.raises(fl.KernelIndexError, match=r"`topk_ids\[2, 1\]` .* is -1, .* 2 id\(s\)"):
        ops.moe_align_block_size(bad, 16, 4)
    with pytest.raises(fl.KernelIndexError, match=r"is 7, outside 0..3"):
        ops.moe_align_block_size(bad.to(torch.int32)[3:], 16, 4)  # i32 ids, read as they are
    bad[:] = 0
    bad[1, 0] = 2**32 + 1  # an int64 id that narrowing to i32 would make expert 1
    with pytest.raises(fl.KernelIndexError, match=r"`topk_ids\[1, 0\]` .* is 4294967297"):
        ops.fused_moe(x, w1, w2, weights, bad)
    with pytest.raises(fl.KernelTypeError, match="must be an int32 or int64 tensor, got f32"):
        ops.moe_align_block_size(ids.float(), 16, 4)
    with pytest.raises(fl.KernelTypeError, match=r"must be \(T, top_k\)"):
        ops.moe_align_block_size(ids[0], 16, 4)
    with pytest.raises(fl.KernelTypeError, match=r"`block_size` .* must be a positive int"):
        ops.moe_align_block_size(ids, 0, 4)
    with pytest.raises(fl.KernelTypeError, match=r"`num_experts` .* must be a positive int"):
        ops.moe_align_block_size(ids, 16, 2.5)
    with pytest.raises(fl.KernelTypeError, match="dtypes"):
        ops.fused_moe(x, w1.half(), w2, weights, ids)
    with pytest.raises(fl.KernelTypeError, match="shapes"):
        ops.fused_moe(x, w1[:, :63], w2, weights, ids)  # 2I odd
    with pytest.raises(fl.KernelTypeError, match="shapes"):
        ops.fused_moe(x, w1, w2[:3], weights, ids)
    with pytest.raises(fl.KernelTypeError, match=r"topk_weights and topk_ids of shape"):
        ops.fused_moe(x, w1, w2, weights[:, :1], ids)


@pytest.mark.parametrize(
    "dtype", [pytest.param("f16", marks=pytest.mark.slow), "bf16"]
)  # f16: make test-slow
def test_the_moe_kernels_compile_through_tileiras(cubin: Callable[..., bytes], dtype: str) -> None:
    dt = getattr(fl, dtype)
    rows, tokens, hidden, inter, experts = 1024 + 8 * 127, 512, 1024, 512, 8
    ids, i32 = fl.zeros((rows,), dtype=fl.i32), fl.zeros((rows // 128,), dtype=fl.i32)
    one = fl.zeros((1,), dtype=fl.i32)
    x = fl.zeros((tokens, hidden), dtype=dt)
    w1 = fl.zeros((experts, 2, inter, hidden), dtype=dt)
    with fl.empty((rows, inter), dtype=dt).partition((128, 128)) as out:
        assert cubin(make_moe_gate_up(dt), out, x, w1, ids, i32, one, 2, 64)
    a, w2 = fl.zeros((rows, inter), dtype=dt), fl.zeros((experts, hidden, inter), dtype=dt)
    weights = fl.zeros((1024,), dtype=fl.f32)
    with fl.empty((rows, hidden), dtype=dt).partition((128, 128)) as out:
        assert cubin(make_moe_down(dt, fl.f32), out, a, w2, ids, i32, one, weights, 64)
        assert cubin(make_moe_down(dt, dt), out, a, w2, ids, i32, one, weights.astype(dt), 64)
    with fl.empty((tokens, hidden), dtype=dt).partition((16, 256)) as out:
        assert cubin(make_moe_sum(dt), out, a, ids, 2)
    counts = fl.zeros((experts,), dtype=fl.i32)
    outs = [fl.zeros((n,), dtype=fl.i32) for n in (rows, rows // 128 + 1, 1024, 9, 1, 1)]
    err = fl.zeros((1,), dtype=fl.i32)
    for idt in (fl.i32, fl.i64):
        ids = fl.zeros((1024,), dtype=idt)
        assert cubin(make_moe_place(idt), *outs, err, counts, ids, 128, 8, 1024)
