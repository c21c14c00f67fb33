"""Loop counters at the edge of their dtype (a red-team helper's findings, 2026-12-07): a `range`
counter runs Python's trip count and never wraps (its last step leaves the loop where the next
value would pass the stop), a run-time step of 0 runs no iteration, and the bounds-check
elimination trusts a counter only where it cannot wrap: a `range` counter, or one stepped by
hand under a guard that bounds it by a length. Before, `for k in range(fl.i8(0), fl.i8(100),
70)` wrapped to -116 and a removed check let `x[k]` read before the array on the GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import simt
from fearless.errors import KernelIndexError
from fearless.ir.simt.parser import parse_function
from fearless.ir.simt.printer import print_function


def _first_line(kernel: simt.Kernel) -> str:
    return kernel.inspect(stage="ir").splitlines()[0]


@simt.kernel
def i32_edge(out: simt.DisjointSlice[fl.i64]):
    i = simt.thread.index_1d()
    if i < len(out):
        n = fl.i64(0)
        for k in range(fl.i32(2**31 - 8), fl.i32(2**31 - 1), 4):  # 2**31 - 8, 2**31 - 4
            n += fl.i64(k) - fl.i64(2**31 - 9)
        out[i] = n


@simt.kernel
def u8_edge(out: simt.DisjointSlice[fl.i64]):
    i = simt.thread.index_1d()
    if i < len(out):
        n = fl.i64(0)
        for _ in range(fl.u8(250), fl.u8(255), 10):  # 250 only
            n += 1
        out[i] = n


@simt.kernel
def i32_low_edge(out: simt.DisjointSlice[fl.i64]):
    i = simt.thread.index_1d()
    if i < len(out):
        n = fl.i64(0)
        for _ in range(fl.i32(-(2**31) + 2), fl.i32(-(2**31)), -3):  # -2**31 + 2 only
            n += 1
        out[i] = n


@simt.kernel
def run_time_range(out: simt.DisjointSlice[fl.i64], start: fl.i32, stop: fl.i32, step: fl.i32):
    i = simt.thread.index_1d()
    if i < len(out):
        n = fl.i64(0)
        for _ in range(start, stop, step):
            n += 1
        out[i] = n


def _count(kernel: simt.Kernel, *args: int) -> int:
    out = np.zeros(1, np.int64)
    kernel[1, 1](out, *args)
    return int(out[0])


def test_a_range_at_its_dtypes_edge_runs_pythons_trip_count() -> None:
    assert _count(i32_edge) == 1 + 5
    assert _count(u8_edge) == 1
    assert _count(i32_low_edge) == 1


@pytest.mark.parametrize(
    ("start", "stop", "step"),
    [
        (2**31 - 8, 2**31 - 1, 4),
        (-(2**31) + 2, -(2**31), -3),
        (0, 10, 3),
        (10, 0, -4),
        (0, 2**31 - 1, 2**30),
        (-(2**31), 2**31 - 1, 2**31 - 1),
        (2**31 - 1, -(2**31), -(2**31)),
        (5, 5, 1),
        (0, 10, 0),
        (10, 0, 0),
    ],
)
def test_a_run_time_range_runs_pythons_trip_count(start: int, stop: int, step: int) -> None:
    # a step of 0 runs no iteration (Python raises ValueError; a literal 0 is refused)
    want = len(range(start, stop, step)) if step else 0
    assert _count(run_time_range, start, stop, step) == want


@simt.kernel
def wrapping_i8(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        acc = fl.f32(0.0)
        for k in range(fl.i8(0), fl.i8(100), 70):  # 0, 70 (wrapped on to -116 before)
            j = fl.i64(k)
            if j < len(x):
                acc += x[j]
        out[i] = acc


def test_a_range_counter_stops_before_it_would_wrap() -> None:
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(1, np.float32)
    wrapping_i8[1, 1](x, out)
    assert out[0] == 0.0 + 70.0


@simt.kernel
def hand_stepped_i16(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        acc = fl.f32(0.0)
        k = fl.i16(0)
        while k < fl.i16(30000):  # 0, 20000, then -25536: k += wraps
            j = fl.i64(k)
            if j < len(x):
                acc += x[j]  # checked on the device: HAND_LINE
            k += fl.i16(20000)
        out[i] = acc


HAND_LINE = hand_stepped_i16.func.__code__.co_firstlineno + 9


def test_a_counter_stepped_by_hand_past_its_end_keeps_its_check() -> None:
    assert "1 bounds check(s) remain on the device, 1 proven" in _first_line(hand_stepped_i16)
    with pytest.raises(KernelIndexError) as e:
        hand_stepped_i16[1, 1](np.ones(64, np.float32), np.zeros(1, np.float32))
    assert "the index is -25536" in str(e.value)
    assert e.value.loc is not None and e.value.loc.line == HAND_LINE


@simt.kernel
def big_steps(x: simt.AtomicSlice[fl.i32], n: fl.i64):
    for k in range(0, n, 1 << 47):  # 2**16 steps reached 2**63 and wrapped before
        if k < len(x):
            simt.atomic.add(x, k, 1)


def test_a_range_counter_with_huge_steps_stops_at_its_end() -> None:
    x = np.zeros(8, np.int32)
    big_steps[1, 1](x, 2**63 - 1)
    assert x.tolist() == [1, 0, 0, 0, 0, 0, 0, 0]


@simt.kernel
def guarded_offset(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32], n: fl.i64):
    i = simt.thread.index_1d()
    if i < len(out):
        acc = fl.f32(0.0)
        for k in range(n):  # k may reach 2**63 - 2: `k + 1` may wrap
            if k + 1 < len(x):
                acc += x[k]
        out[i] = acc


def test_a_guard_whose_sum_may_wrap_proves_nothing() -> None:
    # the guard `k + 1 < len(x)` holds for k = 2**63 - 1 (k + 1 wraps), so x[k] stays checked
    assert "1 bounds check(s) remain on the device, 1 proven" in _first_line(guarded_offset)


@simt.kernel
def constant_loop(out: simt.DisjointSlice[fl.i64]):
    i = simt.thread.index_1d()
    if i < len(out):
        n = fl.i64(0)
        for k in range(0, 64, 4):
            n += k
        out[i] = n


def test_a_range_that_cannot_wrap_stays_one_compare_and_the_others_get_a_last_step() -> None:
    assert "nowrap=True" in constant_loop.inspect(stage="ir")
    for kernel in (constant_loop, guarded_offset):  # 60 + 4 and k + 1 fit their dtypes
        assert "loop.last" not in _blocks(kernel)
    for kernel in (u8_edge, i32_edge, run_time_range):  # 254 + 10 > 255, and so on
        assert "loop.last" in _blocks(kernel)


def _blocks(kernel: simt.Kernel) -> str:
    return " ".join(ln for ln in kernel.inspect(stage="ir").splitlines() if ln.startswith("^"))


@simt.kernel
def strided(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32], n: fl.i64):
    t = simt.thread.index_1d()
    acc = fl.f32(0.0)
    for i in simt.thread.grid_stride(n):
        if i < len(x):
            acc += x[i]
    if t < len(out):
        out[t] = acc


def test_a_grid_stride_stop_is_clamped_below_2_62() -> None:
    text = strided.inspect(stage="ir")
    assert "binary {kind='min'}" in text
    assert "0 bounds check(s) remain" in text.splitlines()[0]


def test_nowrap_round_trips_through_the_text_form() -> None:
    text = print_function(i32_edge.compiled_ir().fn)
    assert "nowrap=True" in text
    assert print_function(parse_function(text)) == text


@pytest.mark.gpu
def test_the_gpu_runs_the_same_trip_counts(sim_and_gpu: Any) -> None:
    def body() -> list[int]:
        counts = [_count(i32_edge), _count(u8_edge), _count(i32_low_edge)]
        for start, stop, step in [(2**31 - 8, 2**31 - 1, 4), (10, 0, -4), (0, 10, 0)]:
            counts.append(_count(run_time_range, start, stop, step))
        x = np.zeros(8, np.int32)
        big_steps[1, 1](x, 2**63 - 1)
        return [*counts, *x.tolist()]

    sim, gpu = sim_and_gpu(body)
    assert sim == gpu
