"""Tile-track fixes of a red-team pass (2026-12): `range` with a negative or run-time step
counts its trips (Tile IR's `for` takes a positive step only), loop bounds and tile indices are
i32 (a wider integer is E0308, not cut), `tile.cdiv` without overflow and with Python's signs,
a Const float keyed by its bits, a bitwise `tile.atomic_cas` on the simulator, the padded-
reduction warning through scans and shape ops, and `...` in tile slices. The compile errors
are in tests/compile_fail/ (tile_range_step_zero, tile_loop_variable_after_loop,
tile_i64_loop_bound, tile_i64_load_index, tile_slice_empty_window, tile_arange_bool,
tile_reduce_axis_twice)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import tile
from fearless.abi import TileParam
from fearless.errors import PaddedReductionWarning
from fearless.runtime import arg_keys
from fearless.runtime.target import Target

I32_MAX, I32_MIN = 2**31 - 1, -(2**31)


def _run(kernel: Any, shape: tuple[int, ...], dtype: Any, tiles: tuple[int, ...], *args: Any):
    out = fl.empty(shape, dtype=dtype)
    with out.partition(tiles) as p:
        kernel(p, *args)
    return out.numpy()


def _ir(kernel: Any, shape: tuple[int, ...], dtype: Any, tiles: tuple[int, ...], *args: Any):
    out = fl.empty(shape, dtype=dtype)
    with out.partition(tiles) as p:
        return kernel.inspect(p, *args, stage="tileir")


# ------------------------------------------------------------------------ range steps


@tile.kernel
def sum_range(out: tile.Part[fl.i32], lo: fl.i32, hi: fl.i32, step: fl.i32):
    s = 0
    n = 0
    for i in range(lo, hi, step):
        s = s + i
        n = n + 1
    out.store(tile.where(tile.arange(4) == 0, s, n))


@tile.kernel
def count_down(out: tile.Part[fl.i32]):
    s = 0
    for i in range(10, 0, -3):
        s = s * 100 + i
    out.store(tile.full((4,), s, fl.i32))


@tile.kernel
def count_up(out: tile.Part[fl.i32], n: fl.i32):
    s = 0
    for i in range(1, n, 2):
        s = s + i
    out.store(tile.full((4,), s, fl.i32))


@tile.kernel
def narrow_bounds(out: tile.Part[fl.i32], lo: fl.i16, hi: fl.u16, n: int):
    s = 0
    for i in range(lo, hi):
        s = s + i
    for _ in range(n):
        s = s + 1
    out.store(tile.full((4,), s, fl.i32))


RANGES = [
    (0, 10, 1),
    (10, 0, -1),
    (10, 0, -3),
    (0, 10, 3),
    (0, 10, -1),
    (5, 5, 2),
    (0, 4, 0),  # a run-time step of 0: no iteration
    (3, -7, -4),
    (I32_MIN, I32_MAX, 2**30),
    (I32_MAX, I32_MIN, -(2**30)),
    (I32_MAX - 2, I32_MAX, 1),
    (I32_MIN + 2, I32_MIN, -1),
    (I32_MIN, I32_MAX, I32_MAX),
    (I32_MAX, I32_MIN, I32_MIN),
]


@pytest.mark.parametrize("lo, hi, step", RANGES)
def test_a_run_time_step_runs_pythons_iterations(lo: int, hi: int, step: int) -> None:
    values = list(range(lo, hi, step)) if step else []
    got = _run(sum_range, (4,), fl.i32, (4,), lo, hi, step)
    assert int(got[0]) == int(np.int64(sum(values)).astype(np.int32))  # the sum wraps
    assert int(got[1]) == len(values)


def test_a_negative_literal_step_counts_the_trips() -> None:
    assert list(_run(count_down, (4,), fl.i32, (4,))) == [10070401] * 4  # 10, 7, 4, 1
    ir = _ir(count_down, (4,), fl.i32, (4,))
    loop = next(line for line in ir.splitlines() if " for " in line)
    assert "tile<i64>" in loop and "step %cst_1_i64" in loop  # 0 to trips, by 1
    assert "step %cst_-" not in ir


def test_a_positive_literal_step_is_tile_irs_for_as_before() -> None:
    assert list(_run(count_up, (4,), fl.i32, (4,), 8)) == [16] * 4
    ir = _ir(count_up, (4,), fl.i32, (4,), 8)
    loop = next(line for line in ir.splitlines() if " for " in line)
    assert "(%cst_1_i32 to %" in loop and "step %cst_2_i32) : tile<i32>" in loop
    assert "i64" not in ir  # no trip count


def test_narrow_integer_and_int_bounds_stay_allowed() -> None:
    assert list(_run(narrow_bounds, (4,), fl.i32, (4,), -3, 5, 4)) == [sum(range(-3, 5)) + 4] * 4


def test_descending_and_run_time_step_loops_compile(cubin: Callable[..., bytes]) -> None:
    out = fl.empty((4,), dtype=fl.i32)
    with out.partition((4,)) as p:
        assert cubin(count_down, p)
        assert cubin(sum_range, p, 0, 10, -1)


@pytest.mark.gpu
def test_the_gpu_runs_the_simulators_iterations(sim_and_gpu: Callable[..., Any]) -> None:
    def body() -> list[Any]:
        got = [_run(count_down, (4,), fl.i32, (4,))]
        got += [_run(sum_range, (4,), fl.i32, (4,), *r) for r in RANGES]
        return [g.copy() for g in got]

    sim, gpu = sim_and_gpu(body)
    for s, g in zip(sim, gpu, strict=True):
        assert np.array_equal(s, g)


# --------------------------------------------------------------------------- tile.cdiv


@tile.kernel
def cdiv_of(out: tile.Part[fl.i32], a: fl.i32, b: fl.i32):
    out.store(tile.full((4,), tile.cdiv(a, b), fl.i32))


@tile.kernel
def cdiv_weak(out: tile.Part[fl.i32], n: int):
    s = 0
    for _ in range(tile.cdiv(n, 4)):  # an `int`'s cdiv stays weak: an i32 loop bound
        s = s + 1
    out.store(tile.full((4,), s + tile.cdiv(7, -2), fl.i32))


@pytest.mark.parametrize(
    "a, b",
    [(7, 2), (7, -2), (-7, 2), (-7, -2), (8, 4), (-8, 4), (0, 3), (I32_MAX, 2), (I32_MAX, 1),
     (I32_MIN, 2), (I32_MIN, 3), (I32_MAX, -2), (1, I32_MAX)],
)  # fmt: skip
def test_cdiv_is_the_ceiling_for_either_sign(a: int, b: int) -> None:
    assert int(_run(cdiv_of, (4,), fl.i32, (4,), a, b)[0]) == -((-a) // b)


def test_cdiv_of_literals_and_weak_values() -> None:
    assert list(_run(cdiv_weak, (4,), fl.i32, (4,), 9)) == [3 + (-3)] * 4


@tile.kernel
def cdiv_by_literal(out: tile.Part[fl.i32], a: fl.i32):
    out.store(tile.full((4,), tile.cdiv(a, 4), fl.i32))


def test_cdiv_by_a_positive_literal_keeps_the_tuned_form() -> None:
    for a in (-9, -8, -1, 0, 1, 7, 8, 9, I32_MAX - 3):
        assert int(_run(cdiv_by_literal, (4,), fl.i32, (4,), a)[0]) == -((-a) // 4)
    ir = _ir(cdiv_by_literal, (4,), fl.i32, (4,), 9)
    assert "addi" in ir and "subi" in ir and "cmpi" not in ir  # (a + 3) // 4, as before


def test_cdiv_compiles(cubin: Callable[..., bytes]) -> None:
    out = fl.empty((4,), dtype=fl.i32)
    with out.partition((4,)) as p:
        assert cubin(cdiv_of, p, 7, -2)


# ------------------------------------------------------------------ Const floats, CAS


@tile.kernel
def fill(out: tile.Part[fl.f32], P: tile.Const[float]):
    out.store(tile.full((4,), P, fl.f32))


def test_a_const_float_is_keyed_by_its_bits() -> None:
    def param(v: float) -> TileParam:
        return TileParam("P", "const", None, value=v)

    assert param(0.0) != param(-0.0)
    assert param(math.nan) == param(math.nan) and hash(param(math.nan)) == hash(param(math.nan))
    assert param(1.5) == param(1.5) and param(1) != param(1.0)
    texts = [_ir(fill, (4,), fl.f32, (4,), v) for v in (0.0, -0.0, math.nan, math.nan)]
    assert "-0.000000e+00" in texts[1] and "-0.000000e+00" not in texts[0]
    assert texts[2] == texts[3]


def test_a_launch_with_minus_zero_runs_its_own_compile() -> None:
    # the dispatcher's key told 0.0 and -0.0 apart too late: (float, 0.0) == (float, -0.0)
    signs = [np.signbit(_run(fill, (4,), fl.f32, (4,), v)[0]) for v in (0.0, -0.0, 0.0, -0.0)]
    assert [bool(s) for s in signs] == [False, True, False, True]


def test_a_nan_const_finds_its_entry_again() -> None:
    """A NaN equals nothing, so a key holding it found no entry: every launch with a fresh NaN
    took the slow path and stored one more key. Keyed by its bits, the second launch is warm."""
    for _ in range(3):
        out = fl.empty(4)
        with out.partition((4,)) as p:
            fill(p, float("nan"))  # a new NaN object each time
        assert np.isnan(out.numpy()).all()
    entries = fill._dispatch.entries  # type: ignore[union-attr]
    nan_keys = [k for k in entries if k[0] is Target.SIM and k[-1][0] is arg_keys.NaNBits]
    assert len(nan_keys) == 1


@tile.kernel
def cas(out: tile.Part[fl.f32], a: tile.Atomic[fl.f32], e: tile.Tensor[fl.f32]):
    desired = tile.full((4,), 1.0, fl.f32)
    out.store(tile.atomic_cas(a, tile.arange(4), tile.load_like(e, out), desired))


def test_atomic_cas_compares_bits_on_the_simulator() -> None:
    a = fl.asarray(np.array([np.nan, -0.0, 0.0, 2.0], np.float32))
    expected = fl.asarray(np.array([np.nan, 0.0, -0.0, 2.0], np.float32))
    old = _run(cas, (4,), fl.f32, (4,), a, expected)
    got = a.numpy()
    assert list(got[[0, 3]]) == [1.0, 1.0]  # the same NaN bits match, as 2.0 does
    assert got[1] == 0.0 and np.signbit(got[1]) and got[2] == 0.0 and not np.signbit(got[2])
    assert np.isnan(old[0]) and list(old[1:]) == [0.0, 0.0, 2.0]


# ------------------------------------------------------------ padded-reduction warning


@tile.kernel
def reverse_cumprod(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.cumprod(tile.load_like(x, out), axis=0, reverse=True))


@tile.kernel
def forward_cumsum(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    out.store(tile.cumsum(tile.load_like(x, out), axis=0))


@tile.kernel
def max_of_transpose(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load(x, (0, 0), (4, 8))
    out.store(tile.max(tile.transpose(v), axis=1))


@tile.kernel
def sum_of_new_axis(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load(x, (0,), (8,))
    out.store(tile.sum(tile.exp(v)[None, :], axis=1))


@tile.kernel
def argmax_zero_padded(out: tile.Part[fl.i32], x: tile.Tensor[fl.f32]):
    v = tile.load(x, (0,), (8,))
    out.store(tile.full((4,), tile.argmax(v, 0), fl.i32))


@tile.kernel
def max_of_windows(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load(x, (0,), (16,))
    first = tile.max(v[0:8])  # in bounds for an extent of 11: no padding
    last = tile.max(v[8:16])  # the padded window
    out.store(tile.full((4,), first + last, fl.f32))


@tile.kernel
def max_of_cat(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load(x, (0,), (8,))
    out.store(tile.full((4,), tile.max(tile.cat((v, v), 0)), fl.f32))


def _warned(body: Callable[[], Any]) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        body()
    return [str(w.message) for w in seen if issubclass(w.category, PaddedReductionWarning)]


NEG5 = -np.arange(1, 6, dtype=np.float32)


@pytest.mark.parametrize(
    "kernel, tiles, name",
    [
        (reverse_cumprod, (8,), "`tile.cumprod` takes in padding 0.0"),
        (max_of_transpose, (8,), "`tile.max` takes in padding 0.0"),
        (sum_of_new_axis, (1,), "`tile.sum` takes in padding 1.0"),
        (max_of_cat, (4,), "`tile.max` takes in padding 0.0"),
    ],
    ids=lambda p: getattr(p, "name", None),
)
def test_padding_is_followed_through_scans_and_shape_ops(
    kernel: Any, tiles: tuple[int, ...], name: str
) -> None:
    x = NEG5.reshape(1, 5) if kernel is max_of_transpose else NEG5
    size = 8 if kernel is max_of_transpose else tiles[0]
    got = _warned(lambda: _run(kernel, (size,), fl.f32, tiles, fl.asarray(x.copy())))
    assert len(got) == 1 and name in got[0], got


def test_a_forward_scan_and_an_in_bounds_window_do_not_warn() -> None:
    assert _warned(lambda: _run(forward_cumsum, (5,), fl.f32, (8,), fl.asarray(NEG5))) == []
    x = fl.asarray(-np.arange(1, 12, dtype=np.float32))
    got = _warned(lambda: _run(max_of_windows, (4,), fl.f32, (4,), x))
    lines = Path(__file__).read_text().splitlines()
    last = next(i for i, t in enumerate(lines, 1) if "last = tile.max(v[8:16])" in t)
    assert len(got) == 1 and f":{last}:" in got[0] and "`tile.max`" in got[0], got


def test_argmax_warns_under_its_own_name() -> None:
    got = _warned(lambda: _run(argmax_zero_padded, (4,), fl.i32, (4,), fl.asarray(NEG5)))
    assert len(got) == 1 and "`tile.argmax` takes in padding 0.0" in got[0], got
    assert "padding=-math.inf" in got[0]


# ------------------------------------------------------------------------------ slices


@tile.kernel
def ellipsis_rows(out: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    v = tile.load(x, (0, 0), (4, 8))
    out.store(v[1, ...] + v[..., 4:8][2, 0])


def test_a_tile_slice_takes_one_ellipsis() -> None:
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    got = _run(ellipsis_rows, (8,), fl.f32, (8,), fl.asarray(x))
    assert np.array_equal(got, x[1] + x[2, 4])


# ------------------------------------------------------- the loop variable after a loop


@tile.kernel
def inner_loop_reuses_a_name(out: tile.Part[fl.i32], n: fl.i32):
    i = 0
    s = 0
    for _ in range(3):
        for i in range(n):  # `i` existed before the outer loop: the outer one no longer carries it
            s = s + i
    out.store(tile.full((4,), s, fl.i32))


@tile.kernel
def reads_it_after_an_inner_loop(out: tile.Part[fl.i32], n: fl.i32):
    i = 0
    s = 0
    for _ in range(3):
        s = s + i  # Python: 0, then the inner loop's last value
        for i in range(n):  # noqa: B007 - the name the line above reads
            s = s + 1
    out.store(tile.full((4,), s, fl.i32))


def test_an_inner_loop_over_a_carried_name_leaves_it_without_a_value() -> None:
    assert list(_run(inner_loop_reuses_a_name, (4,), fl.i32, (4,), 4)) == [18] * 4
    with pytest.raises(fl.CompileError) as info:
        _run(reads_it_after_an_inner_loop, (4,), fl.i32, (4,), 4)
    assert info.value.diagnostic.code == "E0381" and "`i` is the variable of the `for`" in str(
        info.value
    )
