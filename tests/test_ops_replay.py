"""ops/_replay.py and runtime/trace.py on the CPU: an operator made of reported allocations and
a fake launch (NumPy through the pointers it is given, as a kernel would read them) is
recorded on its first call (its second where the first tuned) and replayed from the next, with
each pointer moved to the new call's tensors; everything a replay would skip keeps the slow path. The real operators'
replays run on the H200 (tests/gpu/test_ops_replay_gpu.py)."""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np
import pytest

from fearless.ops import _io, _replay
from fearless.runtime import trace

torch = pytest.importorskip("torch")


def _floats(ptr: int, n: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_float * n).from_address(ptr))


class Axpb:
    """A fake kernel: dst[i] = src[i] * a + (seed % 5) over n floats, from raw pointers."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.runs = 0

    def __call__(self, values: list[Any], stream: Any) -> None:
        assert stream is None
        dst, src, a, seed = values
        _floats(dst, self.n)[:] = _floats(src, self.n) * a + seed % 5
        self.runs += 1


def _launch(run: Any, values: list[Any]) -> None:
    """What runtime/dispatch.py does: report to a recording trace, then launch."""
    rec = trace.current()
    if rec is not None:
        rec.launch(run, values)
    run(values, None)


def _empty_like(x: Any) -> Any:
    shape, dtype = x.shape, x.dtype
    return _io._allocate(lambda: torch.empty(shape, dtype=dtype))


bodies = {"n": 0}


@_replay.replayable(dynamic=("seed",))
def axpb(x: Any, a: float = 2.0, seed: int | None = None, refuse: str = "") -> Any:
    bodies["n"] += 1
    if refuse == "first":  # an autotuner's first call: it times its configurations once
        if not bodies.get("tuned"):
            trace.refuse("tuned", first_call_only=True)
            bodies["tuned"] = 1
    elif refuse:
        trace.refuse(refuse)
    out = _empty_like(x)
    s = _io.fresh_seed() if seed is None else seed
    _launch(Axpb(x.numel()), [out.data_ptr(), x.data_ptr(), a, s])
    return out


@_replay.replayable()
def halves(x: Any) -> Any:
    """Two launches over the halves of x, into two outputs; returns (lo, None, hi)."""
    n = x.numel() // 2
    lo, hi = _empty_like(x[:n]), _empty_like(x[n:])
    _launch(Axpb(n), [lo.data_ptr(), x.data_ptr(), 1.0, 0])
    _launch(Axpb(n), [hi.data_ptr(), x.data_ptr() + 4 * n, 3.0, 0])
    return lo, None, hi


@pytest.fixture(autouse=True)
def _fresh() -> None:
    for fn in (axpb, halves, nothing):
        fn.plans.clear()  # type: ignore[attr-defined]
    bodies["n"] = bodies["tuned"] = 0


def _kinds(fn: Any) -> list[str]:
    return [type(p).__name__ for p in fn.plans.values()]


def test_the_second_call_replays_on_the_new_tensors() -> None:
    xs = [torch.randn(64) for _ in range(4)]
    outs = [axpb(x, 2.0, 7) for x in xs]
    assert bodies["n"] == 1  # the first call, recorded
    assert _kinds(axpb) == ["Plan"]
    for x, out in zip(xs, outs, strict=True):
        torch.testing.assert_close(out, x * 2.0 + 2)
    assert len({o.data_ptr() for o in outs}) == 4  # a new output each call


def test_a_dynamic_argument_goes_into_the_launch_and_others_make_new_keys() -> None:
    x = torch.randn(32)
    axpb(x, 2.0, 0)
    torch.testing.assert_close(axpb(x, 2.0, 3), x * 2.0 + 3)  # replayed, with the new seed
    torch.testing.assert_close(axpb(x, 0.5, 3), x * 0.5 + 3)  # another `a`: its own key
    assert axpb(torch.randn(8), 2.0, 3).shape == (8,)  # another shape: its own key
    assert bodies["n"] == 3
    axpb(x, 2.0, 2**70)  # past i64: the slow path, unkeyed
    assert bodies["n"] == 4


def test_a_dtype_argument_is_part_of_the_key() -> None:
    """An output dtype (torch's or fearless's) keys the call as a scalar does, one key each."""
    import fearless as fl

    x = torch.randn(8)
    keys = [_replay._key(torch, (x, dt), {}, ()) for dt in (torch.bfloat16, torch.float16)]
    keys.append(_replay._key(torch, (x,), {"output_dtype": fl.bf16}, ()))
    assert all(k is not None for k in keys)
    assert len({k[0] for k in keys if k is not None}) == 3


def test_a_drawn_seed_is_drawn_again_by_each_replay() -> None:
    x = torch.zeros(16)
    seen = {axpb(x)[0].item() for _ in range(40)}
    assert bodies["n"] == 1
    assert len(seen) > 1  # (seed % 5) varies from replay to replay


def test_results_keep_their_structure_and_offsets_move_with_the_input() -> None:
    x = torch.arange(8, dtype=torch.float32)
    for _ in range(2):
        halves(x)
    y = torch.arange(8, dtype=torch.float32) + 100
    lo, none, hi = halves(y)
    assert _kinds(halves) == ["Plan"] and none is None
    torch.testing.assert_close(lo, y[:4])
    torch.testing.assert_close(hi, y[4:] * 3)


@_replay.replayable()
def scaled_each(xs: list[Any], ys: list[Any]) -> list[Any]:
    """group_gemm's form: lists of tensors in, a list out (one launch per pair here)."""
    outs = []
    for x, y in zip(xs, ys, strict=True):
        out = _empty_like(x)
        _launch(Axpb(x.numel()), [out.data_ptr(), y.data_ptr(), 2.0, 0])
        outs.append(out)
    return outs


def test_lists_of_tensors_are_read_tensor_by_tensor_and_replayed() -> None:
    scaled_each.plans.clear()  # type: ignore[attr-defined]
    for _ in range(2):
        xs, ys = [torch.zeros(8), torch.zeros(4)], [torch.randn(8), torch.randn(4)]
        got = scaled_each(xs, ys)
    assert _kinds(scaled_each) == ["Plan"]
    assert isinstance(got, list) and len(got) == 2
    for g, y in zip(got, ys, strict=True):
        torch.testing.assert_close(g, y * 2.0)
    scaled_each([torch.zeros(8)], [torch.randn(8)])  # another length: another key
    assert len(scaled_each.plans) == 2  # type: ignore[attr-defined]
    assert _replay._key(torch, ([torch.zeros(2), 1],), {}, ()) is None  # a mixed list


@_replay.replayable()
def nothing(x: Any) -> Any:
    return torch.zeros(1)


def test_a_call_a_replay_would_get_wrong_is_never_replayed() -> None:
    x = torch.randn(16)
    for _ in range(4):
        axpb(x, 2.0, 1, refuse="a dtype conversion")
        nothing(x)
    assert bodies["n"] == 4
    assert [p.why for p in axpb.plans.values()] == ["a dtype conversion"]  # type: ignore[attr-defined]
    assert [p.why for p in nothing.plans.values()] == ["it launched nothing"]  # type: ignore[attr-defined]


def test_overlapping_inputs_leave_a_pointers_owner_ambiguous() -> None:
    @_replay.replayable()
    def add(a: Any, b: Any) -> Any:
        out = _empty_like(a)
        _launch(Axpb(a.numel()), [out.data_ptr(), b.data_ptr(), 1.0, 0])
        return out

    x = torch.randn(16)
    for _ in range(3):
        add(x, x)
    assert [p.why for p in add.plans.values()] == [  # type: ignore[attr-defined]
        "tensors that overlap: a pointer's owner is ambiguous"
    ]


def test_a_pointer_from_nowhere_is_refused() -> None:
    hidden = torch.randn(16)

    @_replay.replayable()
    def reads_hidden(x: Any) -> Any:
        out = _empty_like(x)
        _launch(Axpb(16), [out.data_ptr(), hidden.data_ptr(), 1.0, 0])
        return out

    x = torch.randn(16)
    for _ in range(3):
        reads_hidden(x)
    (plan,) = reads_hidden.plans.values()  # type: ignore[attr-defined]
    assert plan.why.startswith("a launch value")


def test_a_tensor_that_needs_grad_takes_the_slow_path() -> None:
    x = torch.randn(16, requires_grad=True)
    for _ in range(3):
        axpb(x.detach(), 2.0, 1)
    with torch.no_grad():
        axpb(x, 2.0, 1)  # no grad: the same key, replayed
    assert bodies["n"] == 1
    axpb(x, 2.0, 1)  # grad enabled: the slow path (the real operators go to autograd)
    assert bodies["n"] == 2


def test_a_replay_waits_while_the_thread_records_another_call() -> None:
    x = torch.randn(16)
    for _ in range(3):
        axpb(x, 2.0, 1)
    with trace.record() as rec:
        axpb(x, 2.0, 1)
    assert bodies["n"] == 2 and len(rec.launches) == 1 and rec.refused is None


def test_another_threads_recording_leaves_this_threads_replays() -> None:
    """While a call records on one thread (a first call may compile for seconds), a keyed
    call on another thread replays."""
    import threading

    x = torch.randn(16)
    for _ in range(2):
        axpb(x, 2.0, 1)
    assert bodies["n"] == 1
    with trace.record():
        worker = threading.Thread(target=axpb, args=(x, 2.0, 1))
        worker.start()
        worker.join()
    assert bodies["n"] == 1


def test_real_operators_on_the_simulator_stay_on_their_slow_path() -> None:
    from fearless import ops

    x = torch.randn(4, 32)
    for _ in range(3):
        got = ops.softmax(x)
    torch.testing.assert_close(got, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    assert all(type(p) is _replay.Never for p in ops.softmax.plans.values())  # type: ignore[attr-defined]


def test_a_modules_weight_is_read_as_a_plain_tensor() -> None:
    """An nn.Parameter (an inference model's weights: requires_grad, under no_grad) replays as
    a plain tensor does; with grad enabled it takes the slow path (autograd's)."""
    w = torch.nn.Parameter(torch.randn(32))
    with torch.no_grad():
        outs = [axpb(w, 2.0, 1) for _ in range(3)]
    assert bodies["n"] == 1 and _kinds(axpb) == ["Plan"]
    torch.testing.assert_close(outs[2], w.detach() * 2.0 + 1)
    axpb(w, 2.0, 1)
    assert bodies["n"] == 2


def test_an_inference_weight_does_not_send_an_operator_through_the_dispatcher() -> None:
    """ops.rms_norm with an nn.Parameter weight under no_grad runs fearless's own path (the
    warm path replays it on the GPU), not torch.ops.fearless's; with grad, autograd's."""
    from fearless import ops
    from fearless.ops import _route

    x, w = torch.randn(4, 32), torch.nn.Parameter(torch.rand(32) + 0.5)
    with torch.no_grad():
        assert _route.torch_ops(x, w) is None
        got = ops.rms_norm(x, (32,), w, 1e-6)
    torch.testing.assert_close(got, torch.nn.functional.rms_norm(x, (32,), w, 1e-6))
    assert _route.torch_ops(x, w) is not None  # grad enabled, w requires grad: autograd
    assert _route.torch_ops(x, w.detach()) is None


def test_a_first_call_that_tuned_leaves_the_recording_to_the_next() -> None:
    """What only a first call does (the autotuner timing, a compile-ahead pass) keeps that call
    from being replayed, not its key: the next call records; a lasting reason, given before
    or after such a one, is kept."""
    x = torch.randn(16)
    axpb(x, 2.0, 1, refuse="first")
    (plan,) = axpb.plans.values()  # type: ignore[attr-defined]
    assert plan is _replay._AGAIN
    for _ in range(3):
        axpb(x, 2.0, 1, refuse="first")
    assert bodies["n"] == 2 and _kinds(axpb) == ["Plan"]  # the second call recorded
    rec = trace.Trace()
    rec.refuse("tuned", first_call_only=True)
    rec.refuse("a dtype conversion")
    rec.refuse("tuned again", first_call_only=True)
    assert (rec.refused, rec.lasting) == ("a dtype conversion", True)


_kept: dict[str, Any] = {}
steps_seen: list[tuple[Any, ...]] = []


def _record_step(tag: str, x: Any, out: Any, none: Any) -> None:
    steps_seen.append((tag, x, out, none, trace.current()))


@_replay.replayable()
def with_scratch(x: Any) -> Any:
    """An operator with a buffer of its own (allocated by its first call, then kept: the
    kvcache attention's error words) and a host step after its launch that takes its input,
    its output and None (the kvcache attention's check registration)."""
    if "buf" not in _kept:
        _kept["buf"] = _io._allocate(lambda: torch.full((16,), 5.0))
    buf = _kept["buf"]
    trace.keep(buf)
    out = _empty_like(x)
    _launch(Axpb(16), [out.data_ptr(), buf.data_ptr(), 1.0, 0])
    trace.after_launch(functools.partial(_record_step, "step"), x, out, None)
    return out


def test_a_kept_buffer_is_launched_on_as_it_is_and_host_steps_run_with_the_replays_tensors() -> (
    None
):
    with_scratch.plans.clear()  # type: ignore[attr-defined]
    _kept.clear()
    steps_seen.clear()
    x = torch.zeros(16)
    first = with_scratch(x)
    (plan,) = with_scratch.plans.values()  # type: ignore[attr-defined]
    assert type(plan) is _replay.Plan
    assert plan.source.count("= again") == 1  # the output alone is allocated again, not the buffer
    _kept["buf"][:] = 7.0  # a replay reads the buffer where it is
    y = torch.zeros(16)
    second = with_scratch(y)
    torch.testing.assert_close(second, torch.full((16,), 7.0))
    assert second.data_ptr() != first.data_ptr()
    (tag, a, out, none, rec), (_, b, out2, none2, rec2) = steps_seen
    assert (tag, a, out, none) == ("step", x, first, None) and rec is not None  # recorded
    assert b is y and out2 is second and none2 is None and rec2 is None  # replayed


def test_a_host_step_on_a_tensor_from_nowhere_is_never_replayed() -> None:
    hidden = torch.zeros(4)

    @_replay.replayable()
    def steps_on_hidden(x: Any) -> Any:
        out = _empty_like(x)
        _launch(Axpb(x.numel()), [out.data_ptr(), x.data_ptr(), 1.0, 0])
        trace.after_launch(lambda t: None, hidden)
        return out

    for _ in range(2):
        steps_on_hidden(torch.zeros(8))
    (plan,) = steps_on_hidden.plans.values()  # type: ignore[attr-defined]
    assert plan.why == "a host step takes a tensor that is no argument or allocation"


def test_a_filled_torch_output_is_filled_again_by_a_replay() -> None:
    """`_io.filled_output` for a torch operand (a zeroed output where no key is seen, MoE's
    pre-filled sorted ids) records one `torch.full`: what a replay makes again holds the value,
    not an empty tensor's leftovers."""
    from fearless import dtypes

    like = _io.operand(torch.zeros(3), "op", "x")
    with trace.record() as rec:
        _, ret = _io.filled_output(like, (4,), 7, dtypes.i32)
    ((tensor, again),) = rec.allocations
    assert tensor is ret
    torch.testing.assert_close(again(), torch.full((4,), 7, dtype=torch.int32))


def test_a_host_step_on_a_view_of_another_shape_is_never_replayed() -> None:
    """A host step's tensor must be an argument or allocation as it is: a reshaped view starts
    where its owner does, but a replay could only pass the owner, of the other shape."""

    @_replay.replayable()
    def steps_on_a_view(x: Any) -> Any:
        out = _empty_like(x)
        _launch(Axpb(x.numel()), [out.data_ptr(), x.data_ptr(), 1.0, 0])
        trace.after_launch(lambda t: None, x.view(2, -1))
        return out

    for _ in range(2):
        steps_on_a_view(torch.zeros(8))
    (plan,) = steps_on_a_view.plans.values()  # type: ignore[attr-defined]
    assert plan.why == "a host step takes a tensor that is no argument or allocation"
