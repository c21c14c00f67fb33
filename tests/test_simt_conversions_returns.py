"""Literal conversions at compile time agree with the run-time conversion (toward zero; a
literal with no value in the type is E0308, never a wrapped or saturated constant); a device
function's return annotation is checked at each `return`, and a value is returned on every
path; the messages for Python builtins and `math` functions a kernel cannot call, for a local
array's failed bounds check and for an f16 scalar parameter."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import dtypes, simt

# ------------------------------------------------------------------- literal conversions


@simt.kernel
def literals(
    o: simt.DisjointSlice[fl.i32], u: simt.DisjointSlice[fl.u8], f: simt.DisjointSlice[fl.f32]
):
    i = simt.thread.index_1d()
    if i == 0 and i < len(o) and i < len(u) and i < len(f):
        o[i] = fl.i32(2.7)
        u[i] = fl.u8(-0.5)
        f[i] = fl.f32(True)
    if i == 1 and i < len(o) and i < len(u) and i < len(f):
        o[i] = fl.i32(-2.7) + fl.i32(True) + fl.i32(False)
        u[i] = fl.u8(255.9)
        f[i] = fl.f32(fl.i32(-2147483648.5))


@simt.kernel
def at_run_time(x: simt.Slice[fl.f32], o: simt.DisjointSlice[fl.i32], u: simt.DisjointSlice[fl.u8]):
    i = simt.thread.index_1d()
    if i < len(x) and i < len(o) and i < len(u):
        o[i] = fl.i32(x[i])
        u[i] = fl.u8(x[i])


def test_a_literal_converts_toward_zero_as_at_run_time() -> None:
    o, u, f = np.zeros(2, np.int32), np.zeros(2, np.uint8), np.zeros(2, np.float32)
    literals[1, 2](o, u, f)
    np.testing.assert_array_equal(o, [2, -2 + 1 + 0])
    np.testing.assert_array_equal(u, [0, 255])
    np.testing.assert_array_equal(f, [1.0, -2147483648.0])
    ro, ru = np.zeros(3, np.int32), np.zeros(3, np.uint8)
    at_run_time[1, 3](np.array([2.7, -0.5, 255.9], np.float32), ro, ru)
    np.testing.assert_array_equal(ro[:1], o[:1])
    np.testing.assert_array_equal(ru[1:], u)


@simt.device
def i32_of_1e10():  # type: ignore[no-untyped-def]
    return fl.i32(1e10)


@simt.device
def u8_of_minus_1_5():  # type: ignore[no-untyped-def]
    return fl.u8(-1.5)


@simt.device
def i32_of_2_to_40():  # type: ignore[no-untyped-def]
    return fl.i32(2**40)


@simt.device
def i32_of_nan():  # type: ignore[no-untyped-def]
    return fl.i32(math.nan)


@simt.device
def int_of_inf():  # type: ignore[no-untyped-def]
    return int(math.inf)


@simt.device
def i64_of_minus_inf():  # type: ignore[no-untyped-def]
    return fl.i64(-math.inf)


def _converting(convert: simt.DeviceFunction, dtype: Any) -> simt.Kernel:
    @simt.kernel
    def k(out: simt.DisjointSlice[dtype]):  # type: ignore[valid-type]
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = convert()

    return k


@pytest.mark.parametrize(
    ("convert", "dtype", "shown", "label"),
    [
        (i32_of_1e10, fl.i32, "10000000000.0", "outside i32"),
        (u8_of_minus_1_5, fl.u8, "-1.5", "outside u8"),
        (i32_of_2_to_40, fl.i32, "1099511627776", "outside i32"),
        (i32_of_nan, fl.i32, "nan", "NaN has no integer value"),
        (int_of_inf, fl.i64, "inf", "an infinity has no integer value"),
        (i64_of_minus_inf, fl.i64, "-inf", "an infinity has no integer value"),
    ],
    ids=lambda v: getattr(v, "name", None),
)
def test_a_literal_the_type_cannot_hold_is_e0308(
    convert: simt.DeviceFunction, dtype: Any, shown: str, label: str
) -> None:
    with pytest.raises(fl.KernelTypeError) as info:
        _converting(convert, dtype).inspect(stage="ir")
    err = info.value
    assert err.diagnostic.code == "E0308"
    assert err.message == f"`{shown}` does not fit in {dtype.name}"
    assert err.loc is not None and err.loc.line == convert.func.__code__.co_firstlineno + 2
    lo, hi = dtypes.int_range(dtype)
    assert f"{dtype.name} holds the integers {lo} to {hi}" in str(err)
    assert label in str(err)


# ---------------------------------------------------------------------- device returns


@simt.device
def lie(v: fl.f32) -> fl.i32:
    return v


@simt.device
def half(v: fl.f32) -> fl.f32:
    if v > 0.0:
        return v / 2.0
    return 0  # a literal adopts the annotation


@simt.device
def positive_only(v: fl.f32) -> fl.f32:
    if v > 0.0:
        return v


@simt.device
def unannotated_maybe(v: fl.f32):  # type: ignore[no-untyped-def]
    if v > 0.0:
        return v
    return


@simt.device
def store_twice(out: simt.DisjointSlice[fl.f32], i, v: fl.f32):  # type: ignore[no-untyped-def]
    if v > 0.0:
        out[i] = v
        return
    out[i] = -v


@simt.device
def own_index() -> fl.i64:
    return simt.thread.index_1d()


def _calling(device: simt.DeviceFunction, out_dtype: Any = fl.f32) -> simt.Kernel:
    @simt.kernel
    def k(x: simt.Slice[fl.f32], out: simt.DisjointSlice[out_dtype]):  # type: ignore[valid-type]
        i = simt.thread.index_1d()
        if i < len(out) and i < len(x):
            out[i] = device(x[i])

    return k


def test_a_returned_value_of_another_type_is_e0308_at_the_return() -> None:
    with pytest.raises(fl.KernelTypeError) as info:
        _calling(lie, fl.i32).inspect(stage="ir")
    err = info.value
    assert err.diagnostic.code == "E0308"
    assert err.message == "`lie` returns i32 (its annotation), but this value is f32"
    assert err.loc is not None and err.loc.line == lie.func.__code__.co_firstlineno + 2
    assert "help: convert it: `return fl.i32(...)`, or annotate `-> fl.f32`" in str(err)


def test_a_literal_return_takes_the_annotated_type() -> None:
    out = np.zeros(2, np.float32)
    _calling(half)[1, 2](np.array([3.0, -1.0], np.float32), out)
    np.testing.assert_array_equal(out, [1.5, 0.0])


def test_a_thread_index_returned_as_i64_is_its_integer() -> None:
    @simt.kernel
    def k(out: simt.DisjointSlice[fl.i64]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = own_index()

    out = np.zeros(4, np.int64)
    k[1, 4](out)
    np.testing.assert_array_equal(out, np.arange(4))


@pytest.mark.parametrize("device", [positive_only, unannotated_maybe], ids=lambda d: d.name)
def test_a_path_without_a_returned_value_is_e0308_at_the_def(device: Any) -> None:
    with pytest.raises(fl.KernelTypeError) as info:
        _calling(device).inspect(stage="ir")
    err = info.value
    assert err.message == f"device function `{device.name}` does not return a value on every path"
    assert err.loc is not None and err.loc.line == device.func.__code__.co_firstlineno + 1  # def
    assert "end every path with `return <value>`" in str(err)


def test_a_device_function_that_returns_no_value_may_end_anywhere() -> None:
    @simt.kernel
    def k(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(out) and i < len(x):
            store_twice(out, i, x[i])

    out = np.zeros(2, np.float32)
    k[1, 2](np.array([2.0, -3.0], np.float32), out)
    np.testing.assert_array_equal(out, [2.0, 3.0])


# ----------------------------------------------------------------------------- messages


def _applying(fn: Any) -> simt.Kernel:
    @simt.kernel
    def k(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = fn(x[i])

    return k


@pytest.mark.parametrize(
    ("fn", "what", "help"),
    [
        (round, "a Python builtin", "write `math.floor(x + 0.5)` (halves up)"),
        (divmod, "a Python builtin", "write `a // b` and `a % b`"),
        (sorted, "a Python builtin", "kernels call the builtins `len`, `range`"),
        (math.isnan, "a function of Python's `math`", "write `x != x`, which is True only for NaN"),
        (math.gamma, "a function of Python's `math`", "kernels call these math functions"),
        (random.random, "a function of Python's `random`", "compute it on the host"),
    ],
    ids=lambda v: getattr(v, "__name__", None) if callable(v) else None,
)
def test_a_python_library_function_is_not_supported_in_kernels(
    fn: Any, what: str, help: str
) -> None:
    with pytest.raises(fl.CompileError) as info:
        _applying(fn).inspect(stage="ir")
    err = info.value
    assert err.diagnostic.code == "E0605"
    assert err.message == f"`fn` is not supported in kernels: it is {what}"
    assert f"help: {help}" in str(err)
    assert "@simt.device" not in str(err)


def test_the_math_functions_listed_are_the_ones_kernels_call() -> None:
    with pytest.raises(fl.CompileError) as info:
        _applying(math.gamma).inspect(stage="ir")
    listed = str(info.value).split("(whichever module has it): ")[1].split(", ")
    assert {"exp", "erf", "hypot", "rsqrt", "fma", "fmin"} <= set(listed)
    assert "gamma" not in listed and "round" not in listed


def test_math_fmin_points_at_fl_math() -> None:
    @simt.kernel
    def k(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = math.fmin(x[i], 1.0)

    with pytest.raises(fl.CompileError) as info:
        k.inspect(stage="ir")
    assert info.value.diagnostic.code == "E0433"
    assert "help: Python's `math` has no `fmin`; in a kernel call `fl.math.fmin(...)`" in str(
        info.value
    )


def test_a_local_arrays_failed_check_names_it() -> None:
    @simt.kernel
    def k(j: fl.i32, out: simt.DisjointSlice[fl.f32]):
        buf = simt.local.array(4, fl.f32)
        buf[j] = 1.0
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = buf[0]

    with pytest.raises(fl.KernelIndexError) as info:
        k[1, 4](7, np.zeros(4, np.float32))
    assert "writing `buf` in kernel `k`" in str(info.value)
    assert "check the index against `len(buf)`" in str(info.value)


@pytest.mark.parametrize("dtype", [fl.f16, fl.bf16], ids=lambda d: d.name)
def test_an_f16_scalar_parameter_says_to_pass_an_f32(dtype: Any) -> None:
    @simt.kernel
    def k(alpha: dtype, out: simt.DisjointSlice[fl.f32]):  # type: ignore[valid-type]
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = 1.0

    with pytest.raises(fl.CompileError) as info:
        k.inspect(stage="ir")
    err = info.value
    assert err.diagnostic.code == "E0599"
    assert f"a kernel takes no {dtype.name} scalar parameter" in err.message
    assert (
        f"help: pass an f32 and convert it inside: `alpha: fl.f32` and `fl.{dtype.name}(alpha)`"
        in str(err)
    )
