"""fearless.ops' warm path (ops/_replay.py) on the H200: from the third call with a key at the
latest, every operator replays what an earlier call recorded (the first, or the second where
the first tuned), and gives exactly what its slow path gives on the same (new) data."""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import ops
from fearless.ops import _replay, attention, backward_activation, backward_rows

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_target")]


def _r(*shape: int, dt: Any = None) -> Any:
    return torch.randn(*shape, device="cuda", dtype=dt or torch.float32)


CASES: dict[str, tuple[Any, Callable[[], tuple[Any, ...]]]] = {
    "softmax": (ops.softmax, lambda: (_r(33, 200),)),
    "softmax_bf16": (ops.softmax, lambda: (_r(8, 1024, dt=torch.bfloat16),)),
    "rms_norm": (ops.rms_norm, lambda: (_r(4, 7, 96), (96,), _r(96), 1e-6)),
    "rms_norm_no_weight": (ops.rms_norm, lambda: (_r(16, 96), 96)),
    "layer_norm": (ops.layer_norm, lambda: (_r(9, 130), (130,), _r(130), _r(130))),
    "layer_norm_defaults": (ops.layer_norm, lambda: (_r(9, 64), (64,))),
    "matmul": (ops.matmul, lambda: (_r(96, 80, dt=torch.float16), _r(80, 72, dt=torch.float16))),
    "bmm": (ops.bmm, lambda: (_r(3, 64, 32, dt=torch.bfloat16), _r(3, 32, 48, dt=torch.bfloat16))),
    "relu": (ops.relu, lambda: (_r(1000),)),
    "gelu_tanh": (functools.partial(ops.gelu, approximate="tanh"), lambda: (_r(5, 300),)),
    "silu_and_mul": (ops.silu_and_mul, lambda: (_r(6, 256),)),
    "geglu": (ops.geglu, lambda: (_r(6, 96, dt=torch.bfloat16),)),
    "swiglu": (ops.swiglu, lambda: (_r(700), _r(700))),
    "dropout_seeded": (ops.dropout, lambda: (_r(4097), 0.3, True, random.getrandbits(40))),
    "transpose": (ops.transpose, lambda: (_r(70, 130),)),
    "transpose_batched": (ops.transpose, lambda: (_r(2, 64, 96, dt=torch.float16),)),
    "rope": (ops.rope, lambda: (_r(2, 4, 16, 64), _r(2, 2, 16, 64), _r(16, 64), _r(16, 64))),
    "softmax_backward": (backward_rows.softmax_backward, lambda: (_r(12, 300), _r(12, 300))),
    "rms_norm_backward": (
        backward_rows.rms_norm_backward,
        lambda: (_r(20, 128), _r(20, 128), _r(128), 1e-5),
    ),
    "layer_norm_backward": (
        backward_rows.layer_norm_backward,
        lambda: (_r(20, 128), _r(20, 128), _r(128), None, 1e-5),
    ),
    "attention_causal": (
        functools.partial(ops.scaled_dot_product_attention, is_causal=True),
        lambda: tuple(_r(2, 4, 100, 64, dt=torch.float16) for _ in range(3)),
    ),
    "attention_decode_gqa": (  # two kernels and their torch-allocated scratch
        functools.partial(ops.scaled_dot_product_attention, enable_gqa=True),
        lambda: (
            _r(1, 8, 1, 64, dt=torch.bfloat16),
            _r(1, 2, 3000, 64, dt=torch.bfloat16),
            _r(1, 2, 3000, 64, dt=torch.bfloat16),
        ),
    ),
    "attention_backward": (
        attention.scaled_dot_product_attention_backward,
        lambda: tuple(_r(1, 2, 70, 32, dt=torch.float16) for _ in range(5)),
    ),
    "flash_attn_with_kvcache_decode": (  # the split-KV decode, its error words kept
        ops.flash_attn_with_kvcache,
        lambda: (
            _r(2, 1, 8, 64, dt=torch.bfloat16),
            _r(2, 300, 2, 64, dt=torch.bfloat16),
            _r(2, 300, 2, 64, dt=torch.bfloat16),
            torch.tensor([300, 123], dtype=torch.int32, device="cuda"),
        ),
    ),
    "flash_attn_with_kvcache_paged_int_lengths": (  # the general kernel; lengths filled in
        functools.partial(ops.flash_attn_with_kvcache, causal=True),
        lambda: (
            _r(2, 3, 8, 64, dt=torch.float16),
            _r(6, 64, 2, 64, dt=torch.float16),
            _r(6, 64, 2, 64, dt=torch.float16),
            100,
            torch.randperm(6, device="cuda")[:4].reshape(2, 2).to(torch.int32),
        ),
    ),
    "fused_moe_decode": (  # int64 ids and bf16 weights read as they come, ids checked on the GPU
        ops.fused_moe,
        lambda: (
            _r(4, 256, dt=torch.bfloat16),
            _r(8, 256, 256, dt=torch.bfloat16) * 0.1,
            _r(8, 256, 128, dt=torch.bfloat16) * 0.1,
            torch.softmax(_r(4, 2), -1).to(torch.bfloat16),
            torch.randint(0, 8, (4, 2), device="cuda"),
        ),
    ),
    "moe_align_block_size": (
        ops.moe_align_block_size,
        lambda: (torch.randint(0, 16, (40, 4), device="cuda", dtype=torch.int32), 16, 16),
    ),
    "gelu_backward": (backward_activation.gelu_backward, lambda: (_r(900), _r(900))),
    "swiglu_backward": (backward_activation.swiglu_backward, lambda: (_r(640), _r(640), _r(640))),
}


def _wrapper(op: Any) -> Any:
    """The replayable function behind `op` (a case may give it as a functools.partial)."""
    return getattr(op, "func", op)


def _same(got: Any, want: Any) -> None:
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
        return
    if want is None:
        assert got is None
        return
    assert got.shape == want.shape and got.dtype == want.dtype and got.device == want.device
    assert torch.equal(got, want)


@pytest.mark.parametrize("name", list(CASES))
def test_replay_gives_what_the_slow_path_gives(name: str) -> None:
    op, make = CASES[name]
    fn = _wrapper(op)
    fn.plans.clear()
    for _ in range(2):  # the first call records, or tunes and leaves it to the second
        op(*make())
    plans = [p for p in fn.plans.values() if type(p) is _replay.Plan]
    assert plans, {k: v for k, v in fn.plans.items()}
    args = make()  # new data: the replay reads this call's pointers
    got = op(*args)
    with _slow(fn):
        want = op(*args)
    torch.cuda.synchronize()
    _same(got, want)


class _slow:
    """Within: `fn` takes its slow path (its plans set aside)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __enter__(self) -> None:
        self.kept = dict(self.fn.plans)
        self.fn.plans.clear()

    def __exit__(self, *_: Any) -> None:
        self.fn.plans.clear()
        self.fn.plans.update(self.kept)


def test_dropout_replays_draw_a_new_mask_each_call() -> None:
    x = torch.ones(1 << 16, device="cuda")
    masks = [(ops.dropout(x, 0.5) != 0) for _ in range(4)]
    assert any(type(p) is _replay.Plan for p in ops.dropout.plans.values())  # type: ignore[attr-defined]
    for a, b in itertools.pairwise(masks):
        assert not torch.equal(a, b)
    for m in masks:
        assert 0.45 < m.float().mean().item() < 0.55
    y = ops.dropout(x, 0.5)
    assert set(torch.unique(y).tolist()) <= {0.0, 2.0}


def test_a_strided_input_is_never_replayed() -> None:
    x = _r(64, 64).t()
    for _ in range(3):
        got = ops.relu(x)
    torch.testing.assert_close(got, torch.relu(x))
    whys = [p.why for p in ops.relu.plans.values() if type(p) is _replay.Never]  # type: ignore[attr-defined]
    assert "a contiguous copy of a strided input" in whys


def test_replays_follow_torch_streams_and_graphs() -> None:
    x = _r(256, 128)
    for _ in range(3):
        ops.softmax(x)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = ops.softmax(x)
    s.synchronize()
    torch.testing.assert_close(y, torch.softmax(x, -1), rtol=2e-4, atol=2e-4)
    static = _r(256, 128)
    ops.softmax(static)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = ops.softmax(static)
    static.copy_(_r(256, 128))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.softmax(static, -1), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "matmul", "rope", "rms_norm_backward"])
def test_fl_tensors_are_replayed_too(name: str) -> None:
    op, make = CASES[name]
    fn = _wrapper(op)
    fn.plans.clear()

    def fl_args() -> tuple[Any, ...]:
        return tuple(fl.asarray(a) if isinstance(a, torch.Tensor) else a for a in make())

    for _ in range(2):
        op(*fl_args())
    assert any(type(p) is _replay.Plan for p in fn.plans.values()), dict(fn.plans)
    args = fl_args()
    got = op(*args)
    with _slow(fn):
        want = op(*args)
    fl.synchronize()
    for g, w in zip(_flat(got), _flat(want), strict=True):
        assert isinstance(g, fl.Tensor) and g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def _flat(r: Any) -> list[Any]:
    return [x for x in (r if isinstance(r, (tuple, list)) else [r]) if x is not None]
