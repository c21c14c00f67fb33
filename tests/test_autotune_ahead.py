"""Issue 37: an op's several tuned kernels compile side by side on its first call. Inside a
compile-ahead pass an autotuned function queues the compiles its real call will need (its
winner once known, else every configuration it will time) and chooses nothing; and
`attention_backward` runs such a pass over its steps on a shape whose tuners have not chosen.

The pass's launches are made to take the ahead path on the simulator (`ahead_applies`), and
the compiles are recorded, not run, so no tileiras is needed."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import autotune_ahead, tile
from fearless.tile import compile_ahead as ahead

pytestmark = pytest.mark.usefixtures("autotune_on_sim")


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Any, Any]]]:
    """The (kernel, key) of every compile a pass starts; each compile is a recorded no-op,
    dropped from its kernel afterwards so that no later launch takes it."""
    kernel_module = importlib.import_module("fearless.tile.kernel")
    monkeypatch.setattr(kernel_module, "ahead_applies", lambda target: True)
    names: list[str] = []

    def fake_compile(ir: Any, arch: str) -> None:
        names.append(ir.name)

    monkeypatch.setattr(ahead, "compile_cubin", fake_compile)
    met: list[tuple[Any, Any]] = []
    real_submit = ahead.submit

    def submit(kernel: Any, args: tuple[Any, ...], target: Any) -> None:
        real_submit(kernel, args, target)
        met.append(ahead.STATE.launches[-1])

    monkeypatch.setattr(kernel_module, "ahead_submit", submit)
    monkeypatch.setattr(autotune_ahead, "_compiled_ahead", set())  # no other test's first calls
    yield met
    for kernel, key in met:
        pending: Future[Any] | None = kernel.compiles.ahead.pop(key, None)
        if pending is not None:
            pending.result()


def doubled_tuned() -> Any:
    @fl.autotune(configs=[{"TILE": 16, "occupancy": 1}, {"TILE": 32, "occupancy": 2}], key=["x"])
    @tile.kernel
    def doubled(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32], TILE: tile.Const[int]):
        out.store(tile.load_like(x, out) * 2.0)

    return doubled


def test_in_a_pass_a_new_key_queues_every_configuration_and_chooses_none(
    queued: list[tuple[Any, Any]],
) -> None:
    doubled = doubled_tuned()
    host = np.zeros(64, np.float32)
    x, part = fl.asarray(np.arange(64, dtype=np.float32)), fl.asarray(host).partition((64,))
    with ahead.compile_ahead(1):
        doubled(part, x)
    hints = sorted(kernel.hints.occupancy for kernel, _ in queued)
    assert hints == [1, 2] and not doubled._best
    assert host.tolist() == [0.0] * 64  # nothing ran


def test_in_a_pass_a_chosen_key_queues_its_winner_alone(queued: list[tuple[Any, Any]]) -> None:
    doubled = doubled_tuned()
    x = fl.asarray(np.arange(64, dtype=np.float32))
    out = fl.zeros(64)
    part = out.partition((64,))
    best = doubled.best_config(part, x)  # tuned on the simulator
    with ahead.compile_ahead(1):
        doubled(part, x)
    assert [kernel.hints.occupancy for kernel, _ in queued] == [best["occupancy"]]


def test_off_the_gpu_compile_ahead_of_runs_nothing() -> None:
    ran: list[int] = []
    autotune_ahead.compile_ahead_of(lambda: ran.append(1))
    assert ran == []


@pytest.mark.parametrize(("d", "atomic"), [(64, True), (128, True), (128, False)])
def test_the_attention_backward_compiles_every_step_in_one_pass_on_a_new_shape(
    monkeypatch: pytest.MonkeyPatch, queued: list[tuple[Any, Any]], d: int, atomic: bool
) -> None:
    """FlashAttention-2's atomic dQ (dk_dv adds into an f32 dQ, finish_dq scales it), or the
    three kernels (the dq kernel), by DQ_BY_ATOMICS_UP_TO."""
    from fearless.ops import kernels_attention_backward as KB

    monkeypatch.setattr(KB, "DQ_BY_ATOMICS_UP_TO", 256 if atomic else 0)
    passes: list[Any] = []
    monkeypatch.setattr(autotune_ahead, "compile_ahead_of", passes.append)
    rng = np.random.default_rng(0)
    q, out, dout = (
        fl.asarray(rng.standard_normal((1, 2, 64, d)).astype(np.float16)) for _ in range(3)
    )
    grads = [fl.zeros(q.shape, dtype=fl.f16) for _ in range(3)]
    args = (q, q, q, out, dout, *grads, 0.125, True, 1)
    KB.attention_backward(*args)
    assert len(passes) == 1  # the first call with this key
    KB.attention_backward(*args)
    assert len(passes) == 1  # not the second
    ran = [g.numpy() for g in grads]
    assert all(g.any() for g in ran)  # the real calls ran
    with ahead.compile_ahead(4):  # the pass itself: every step's kernel is queued at once
        passes[0]()
    names = {kernel.name for kernel, _ in queued}
    steps = {"attention_stats", "attention_dkdv", "finish_dq" if atomic else "attention_dq"}
    assert steps <= names, names
    assert all((g.numpy() == r).all() for g, r in zip(grads, ran, strict=True))  # none ran


def test_a_training_forward_compiles_its_backward_beside_itself_once(
    monkeypatch: pytest.MonkeyPatch, queued: list[tuple[Any, Any]]
) -> None:
    """scaled_dot_product_attention_lse (the forward autograd runs in training) opens one pass
    over itself and the backward to come on its first call with a key; the result is the
    forward's all the same."""
    from fearless import ops
    from fearless.ops import attention as A

    passes: list[bool] = []  # whether a pass was open already

    def on_the_gpu(call: Any) -> None:  # compile_ahead_of without its off-the-GPU gate
        passes.append(ahead.STATE.thread is not None)
        with ahead.compile_ahead(4):
            call()

    monkeypatch.setattr(autotune_ahead, "compile_ahead_of", on_the_gpu)
    rng = np.random.default_rng(1)
    q, k, v = (
        fl.asarray(rng.standard_normal((1, 2, 48, 128)).astype(np.float16)) for _ in range(3)
    )
    out, lse = A.scaled_dot_product_attention_lse(q, k, v, is_causal=True)
    names = {kernel.name for kernel, _ in queued}
    assert {"attention", "attention_delta", "attention_dkdv", "finish_dq"} <= names, names
    assert passes == [False, True]  # the backward's own first call came inside this pass
    expected = ops.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert np.array_equal(out.numpy(), expected.numpy()) and lse.shape == (1, 2, 48)
    A.scaled_dot_product_attention_lse(q, k, v, is_causal=True)
    assert passes == [False, True]  # once per key


def test_a_split_kv_decode_compiles_its_split_and_combine_in_one_pass(
    monkeypatch: pytest.MonkeyPatch, queued: list[tuple[Any, Any]]
) -> None:
    """split_kv_launch (every split-KV decode's launches) runs the split kernel and the
    combine in one pass the first time a form is met (splits by size class): another S of
    as many splits opens no other."""
    from fearless.ops import kernels_attention_decode as KA

    rng = np.random.default_rng(7)
    q = fl.asarray(rng.standard_normal((1, 2, 4, 64)).astype(np.float32))
    want = []
    for s in (64, 50):
        k, v = (fl.asarray(rng.standard_normal((1, 2, s, 64)).astype(np.float32)) for _ in "kv")
        out = fl.zeros(q.shape)
        KA.attention_decode_split(q, k, v, out, 0.125, 16)
        want.append((k, v, out.numpy()))
    passes = _passes_on_the_gpu(monkeypatch)
    for k, v, expected in want:
        out = fl.zeros(q.shape)
        KA.attention_decode_split(q, k, v, out, 0.125, 16)
        np.testing.assert_array_equal(out.numpy(), expected)
    names = {kernel.name for kernel, _ in queued}
    assert names == {"decode_split", "decode_combine"}
    assert passes == [1]  # S 64 and 50: 4 splits each, one form


def _passes_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """compile_ahead_of without its off-the-GPU gate: each pass counted, then opened."""
    passes: list[int] = []

    def on_the_gpu(call: Any) -> None:
        passes.append(1)
        with ahead.compile_ahead(4):
            call()

    monkeypatch.setattr(autotune_ahead, "compile_ahead_of", on_the_gpu)
    monkeypatch.setattr(autotune_ahead, "_compiled_ahead", set())  # the reference's calls
    return passes


def test_fused_linear_cross_entropy_compiles_its_four_steps_in_one_pass(
    monkeypatch: pytest.MonkeyPatch, queued: list[tuple[Any, Any]]
) -> None:
    from fearless.ops import linear_cross_entropy as LCE

    rng = np.random.default_rng(2)
    h, w = rng.standard_normal((37, 40)), rng.standard_normal((300, 40))
    h, w = h.astype(np.float32), w.astype(np.float32)
    t = rng.integers(0, 300, 37)
    want = LCE.forward(h, w, t, None, -100, 16, "mean", True)  # no pass: off the GPU
    passes = _passes_on_the_gpu(monkeypatch)
    got = LCE.forward(h, w, t, None, -100, 16, "mean", True)
    names = {kernel.name for kernel, _ in queued}
    assert passes == [1]
    assert names == {"logits", "cross_entropy", "matmul", "dw_out", "dw_add"}  # dh by matmul
    for g, r in zip(got[:3], want[:3], strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(r))
    LCE.forward(h, w, t, None, -100, 16, "mean", True)
    assert passes == [1]  # once for these sizes


def test_fused_moe_compiles_both_projections_in_one_pass(
    monkeypatch: pytest.MonkeyPatch, queued: list[tuple[Any, Any]]
) -> None:
    from fearless import ops

    rng = np.random.default_rng(3)
    x = rng.standard_normal((9, 32)).astype(np.float32)
    w1 = rng.standard_normal((4, 64, 32)).astype(np.float32) / 8
    w2 = rng.standard_normal((4, 32, 32)).astype(np.float32) / 8
    weights = rng.random((9, 2)).astype(np.float32)
    ids = np.stack([rng.permutation(4)[:2] for _ in range(9)]).astype(np.int64)
    want = ops.fused_moe(x, w1, w2, weights, ids)
    passes = _passes_on_the_gpu(monkeypatch)
    got = ops.fused_moe(x, w1, w2, weights, ids)
    names = {kernel.name for kernel, _ in queued}
    assert passes == [1] and names == {"moe_gate_up", "moe_down", "moe_sum"}
    np.testing.assert_array_equal(got, want)


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _mamba2(backward: bool) -> Any:
    from fearless import ops

    rng = np.random.default_rng(4)
    x, b, c = _f32(rng, 1, 21, 2, 12), _f32(rng, 1, 21, 1, 10), _f32(rng, 1, 21, 1, 10)
    a, d = -rng.random(2).astype(np.float32) - 0.5, _f32(rng, 2)
    dt, s0 = rng.random((1, 21, 2)).astype(np.float32), _f32(rng, 1, 2, 12, 10)
    if not backward:
        return ops.mamba2_chunk_forward(x, a, b, c, d, dt, s0, 16)
    dy, dfin = _f32(rng, 1, 21, 2, 12), _f32(rng, 1, 2, 12, 10)
    return ops.mamba2_chunk_backward(x, a, b, c, d, dt, s0, dy, dfin, 16)


def _delta_rule() -> Any:
    from fearless import ops

    rng = np.random.default_rng(5)
    q, k, v = _f32(rng, 1, 37, 1, 12), _f32(rng, 1, 37, 1, 12), _f32(rng, 1, 37, 1, 20)
    g = -rng.random((1, 37, 1)).astype(np.float32)
    beta = rng.random((1, 37, 1)).astype(np.float32)
    return ops.chunk_gated_delta_rule(q, k, v, g, beta, 16, _f32(rng, 1, 1, 12, 20), True)


def _norm_backward(op: str) -> Any:
    from fearless.ops import backward_rows as ops

    rng = np.random.default_rng(6)
    dy, x, w = _f32(rng, 7, 96), _f32(rng, 7, 96), _f32(rng, 96)
    if op == "rms":
        return ops.rms_norm_backward(dy, x, w, 1e-6)
    return ops.layer_norm_backward(dy, x, w, _f32(rng, 96), 1e-5)


def _moe_backward() -> Any:
    from fearless.ops import moe as ops

    rng = np.random.default_rng(11)
    x, dy = _f32(rng, 9, 32), _f32(rng, 9, 32)
    w1, w2 = _f32(rng, 4, 64, 32) / 8, _f32(rng, 4, 32, 32) / 8
    weights = rng.random((9, 2)).astype(np.float32)
    ids = np.stack([rng.permutation(4)[:2] for _ in range(9)]).astype(np.int64)
    return ops.fused_moe_backward(dy, x, w1, w2, weights, ids)


@pytest.mark.parametrize(
    ("call", "steps"),
    [
        (_moe_backward, {"moe_act_bwd", "moe_dx", "moe_sum", "moe_dw1", "moe_dw2", "moe_dweights"}),
        (lambda: _mamba2(False), {"chunk_states", "chunk_out"}),
        (
            lambda: _mamba2(True),
            {
                "chunk_states",
                "chunk_dx",
                "chunk_db",
                "chunk_dc",
                "chunk_ddt",
                "group_sum",
                "head_sum",
            },
        ),
        (_delta_rule, {"chunk_prepare", "chunk_inter"}),
        (lambda: _norm_backward("rms"), {"norm_bwd", "column_sum"}),
        (lambda: _norm_backward("layer"), {"norm_bwd", "column_sum"}),
    ],
    ids=[
        "fused_moe_backward",
        "mamba2_forward",
        "mamba2_backward",
        "chunk_gated_delta_rule",
        "rms_norm_bwd",
        "ln_bwd",
    ],
)
def test_ops_of_several_kernels_compile_them_in_one_pass(
    monkeypatch: pytest.MonkeyPatch, queued: list[tuple[Any, Any]], call: Any, steps: set[str]
) -> None:
    """Each op's kernels are all queued by one pass on its first call, and its results are
    the same as without the pass."""
    want = call()
    passes = _passes_on_the_gpu(monkeypatch)
    got = call()
    names = {kernel.name for kernel, _ in queued}
    assert passes == [1] and names == steps
    for g, w in zip(got, want, strict=True):
        if w is not None:
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _mla_decode() -> Any:
    from fearless import ops

    rng = np.random.default_rng(8)
    q, qpe = _f32(rng, 1, 4, 64), _f32(rng, 1, 4, 16)
    kv, kpe = _f32(rng, 1, 64, 64), _f32(rng, 1, 64, 16)
    return ops.mla_decoding_split_kv(q, qpe, kv, kpe, 0.1, 16)


def _sink_decode() -> Any:
    from fearless import ops

    rng = np.random.default_rng(9)
    q, k, v = _f32(rng, 1, 1, 2, 4, 64), _f32(rng, 1, 64, 2, 64), _f32(rng, 1, 64, 2, 64)
    return ops.attention_sink_decode(q, k, v, _f32(rng, 8), 0.125, None, 63, 16)


@pytest.mark.parametrize(
    ("call", "steps"),
    [
        (_mla_decode, {"mla_decode_split", "mla_combine"}),
        (_sink_decode, {"sink_decode_split", "sink_decode_combine"}),
    ],
    ids=["mla_decoding_split_kv", "attention_sink_decode"],
)
def test_the_other_split_kv_decodes_compile_split_and_combine_in_one_pass(
    monkeypatch: pytest.MonkeyPatch, queued: list[tuple[Any, Any]], call: Any, steps: set[str]
) -> None:
    want = call()
    passes = _passes_on_the_gpu(monkeypatch)
    got = call()
    assert passes == [1] and {kernel.name for kernel, _ in queued} == steps
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_in_a_pass_a_configuration_that_raises_leaves_the_next_ones_result(
    queued: list[tuple[Any, Any]],
) -> None:
    """The op's next step in the pass takes the first result of a configuration that did not
    raise (a norm backward's partial sums), not None."""

    @fl.autotune(configs=[{"rows": 0}, {"rows": 2}], key=["x"])
    def halves(x: Any, *, rows: int) -> Any:
        if not rows:
            raise fl.LaunchContractError("0 rows do not fit")
        return fl.zeros((rows,))

    with ahead.compile_ahead(1):
        got = halves(np.zeros(4, np.float32))
    assert got.shape == (2,)


def test_an_error_inside_a_pass_never_reaches_the_real_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What ran nothing may fail where the real call does not: the pass only saves time."""
    monkeypatch.setattr(autotune_ahead, "_compiled_ahead", set())
    from fearless.runtime import target

    monkeypatch.setattr(
        target, "current_target", lambda: type("T", (), {"on_device": True})()
    )  # the pass's gate only: nothing in the call reads the target

    def breaks() -> None:
        raise AttributeError("'NoneType' object has no attribute 'shape'")

    autotune_ahead.compile_ahead_of(breaks)  # no exception
    assert ahead.STATE.thread is None


def test_group_gemm_compiles_every_groups_gemm_in_one_pass(
    monkeypatch: pytest.MonkeyPatch, queued: list[tuple[Any, Any]]
) -> None:
    from fearless import ops
    from fearless.ops import functional

    monkeypatch.setattr(functional, "_in_group_launches", lambda pairs: None)  # per group
    rng = np.random.default_rng(10)
    As = [_f32(rng, 40, 24), _f32(rng, 100, 24)]
    Bs = [_f32(rng, 24, 32), _f32(rng, 24, 72)]
    want = ops.group_gemm(As, Bs)
    passes = _passes_on_the_gpu(monkeypatch)
    got = ops.group_gemm(As, Bs)
    assert passes == [1] and len(queued) >= 2  # both groups' GEMMs launched in the pass
    assert {kernel.name for kernel, _ in queued} == {"matmul"}
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_a_call_in_a_pass_neither_replays_nor_marks_its_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ops/_replay.py: inside a pass an operator takes its slow path (whose launches queue)
    and leaves its key unseen: the real first call is the one that records (here a call that
    launches nothing, never replayed)."""
    pytest.importorskip("torch")
    from fearless.ops import _replay

    ran: list[int] = []

    @_replay.replayable()
    def op(x: Any) -> Any:
        ran.append(x)
        return x

    monkeypatch.setattr(_replay, "_key", lambda *_: (("key",), [], [], []))
    with ahead.compile_ahead(1):
        op(1)
    assert ran == [1] and op.plans == {}  # type: ignore[attr-defined]
    op(2)
    assert op.plans == {("key",): _replay.Never("it launched nothing")}  # type: ignore[attr-defined]


def test_another_threads_pass_leaves_this_threads_calls_their_replays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pass belongs to the thread that opened it: while it is open, a call on another
    thread records and replays as ever."""
    import threading

    pytest.importorskip("torch")
    from fearless.ops import _replay

    @_replay.replayable()
    def op(x: Any) -> Any:
        return x

    monkeypatch.setattr(_replay, "_key", lambda *_: (("key",), [], [], []))
    with ahead.compile_ahead(1):
        worker = threading.Thread(target=op, args=(1,))
        worker.start()
        worker.join()
    assert op.plans == {("key",): _replay.Never("it launched nothing")}  # type: ignore[attr-defined]


def test_gluacts_split_form_compiles_both_gemms_in_one_pass(
    monkeypatch: pytest.MonkeyPatch, queued: list[tuple[Any, Any]]
) -> None:
    """linear_gluact_linear's split form (its tuned function's non-fused configurations)."""
    from fearless.ops import kernels_gluact as KG

    rng = np.random.default_rng(12)
    x, wa, wn = (fl.asarray(_f32(rng, *s)) for s in ((40, 64), (96, 64), (96, 64)))
    w2 = fl.asarray(_f32(rng, 80, 96))
    split = {k: v for k, v in KG.GLUACT_CONFIGS[4].items()}
    assert not split["fused"]

    def call() -> np.ndarray:
        out = fl.zeros((40, 80))
        KG.gluact_tuned.fn("silu", x, wa, wn, w2, out, lambda: fl.zeros((40, 96)), **split)
        return out.numpy()

    want = call()
    passes = _passes_on_the_gpu(monkeypatch)
    got = call()
    names = {kernel.name for kernel, _ in queued}
    assert passes == [1] and names == {"gluact_gate_up", "gluact_down"}, names
    np.testing.assert_array_equal(got, want)


def test_a_variants_training_forward_compiles_its_backward_beside_itself(
    monkeypatch: pytest.MonkeyPatch, queued: list[tuple[Any, Any]]
) -> None:
    """swa_attention's training forward (a window: the variant kernels) opens one pass over
    itself and its backward, with the window's bounds; its result is unchanged."""
    from fearless.ops import attention_variants as AV

    rng = np.random.default_rng(13)
    q, k, v = (fl.asarray(rng.standard_normal((1, 2, 48, 64)).astype(np.float16)) for _ in range(3))
    from fearless.ops import kernels_attention_backward as KB

    want, _ = AV.attend("swa_attention", q, k, v, None, True, 8, None, None, keep_lse=True)
    passes = _passes_on_the_gpu(monkeypatch)
    variants: list[Any] = []
    steps = KB._backward

    def recorded(*args: Any) -> Any:
        variants.append(args[11:15])  # variant, WL, WR, CAP
        return steps(*args)

    monkeypatch.setattr(KB, "_backward", recorded)
    out, _ = AV.attend("swa_attention", q, k, v, None, True, 8, None, None, keep_lse=True)
    names = {kernel.name for kernel, _ in queued}
    assert {"attention", "attention_delta", "attention_dkdv"} <= names, names
    # the window's backward (twice: this test's stand-in runs the nested pass's call too)
    assert variants and set(variants) == {((False, True, False, False), 8, 0, 1.0)}
    assert passes[0] == 1 and np.array_equal(out.numpy(), want.numpy())
