"""Tests that guard the guards (issue 33): the SIMT track and the argument binder on the
simulator. Each safety check was switched off in turn and the CPU suite run; the checks whose
removal no test noticed get a test here, whose docstring names the check it protects.

Also the SIMT side of issue 33's fault-campaign findings (clear messages for a bool scalar,
NumPy and float grids, a kernel without source, the simulator's thread limit).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import cache, simt, tile
from fearless.runtime.binder import scalar_fits

BF16_MAX = 3.3895313892515355e38  # 0x7F7F: (2 - 2**-7) * 2**127
BF16_HALFWAY = 3.3961775292304611e38  # 0x7F7F8000 as f32: ties to even round it to inf


@simt.kernel
def put_f32(out: simt.DisjointSlice[fl.f32], v: fl.f32):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = v


@simt.kernel
def put_i32(out: simt.DisjointSlice[fl.i64], v: fl.i32):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = fl.i64(v)


@simt.kernel
def diff_guarded(a: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i + 1 < len(a) and i < len(out):
        out[i] = a[i + 1] - a[i]


@simt.kernel
def diff_unguarded(a: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = a[i + 1] - a[i]


@simt.kernel
def two_outputs(c: simt.DisjointSlice[fl.f32], d: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(c):
        c[i] = 1.0
    if i < len(d):
        d[i] = 2.0


@simt.kernel
def add(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = a[i] + b[i]


@simt.kernel(requires=("len(a) == len(out)", "n <= len(out)"))
def first_n(a: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32], n: int):
    i = simt.thread.index_1d()
    if i < n:
        out[i] = a[i]


STORE_TO_ATOMIC = """
import fearless as fl
from fearless import simt


@simt.kernel
def bad(h: simt.AtomicSlice[fl.i32]):
    i = simt.thread.index_1d()
    if i < len(h):
        h[i] = 1
"""

READ_OTHER = """
import fearless as fl
from fearless import simt


@simt.kernel
def bad(out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i + 1 < len(out):
        out[i] = out[int(i) + 1]
"""


def _module(tmp_path: Path, name: str, source: str) -> Any:
    """A kernel module written to a file and imported (kernels need a source file)."""
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------ scalar ranges


def test_bf16_scalars_up_to_the_largest_finite_are_accepted() -> None:
    """Guard: binder.scalar_fits' bf16 test (a finite value whose bf16 rounding is infinite is
    refused). 1e39 overflows f32 first and 3.0e38 fits, so only values between the largest
    finite bf16 and f32's largest tell whether the rounding is checked."""
    assert scalar_fits(BF16_MAX, fl.bf16) and scalar_fits(-BF16_MAX, fl.bf16)
    assert scalar_fits(np.nextafter(BF16_HALFWAY, 0.0, dtype=np.float32).item(), fl.bf16)
    for rounds_to_inf in (BF16_HALFWAY, 3.4e38, -3.4e38, 3.4028234663852886e38):
        assert not scalar_fits(rounds_to_inf, fl.bf16), rounds_to_inf
    assert scalar_fits(float("inf"), fl.bf16)  # infinity is a bf16: passed as it is
    # a launch with a bf16 scalar: test_guards_tile.py (SIMT kernels take no bf16 scalar)


def test_i32_scalars_at_the_boundary_are_accepted_and_past_it_refused() -> None:
    """Guard: binder.scalar_fits' integer range (the simulator's bind_args)."""
    out = np.zeros(2, np.int64)
    for v in (2**31 - 1, -(2**31), np.int64(2**31 - 1)):
        put_i32[1, 2](out, v)
        assert (out == int(v)).all()
    for v in (2**31, -(2**31) - 1, np.int64(2**31)):
        with pytest.raises(fl.KernelTypeError, match="does not fit the parameter's type i32"):
            put_i32[1, 2](out, v)
    assert (out == 2**31 - 1).all()  # no refused launch ran


def test_a_bool_for_an_int_scalar_says_so() -> None:
    """Issue 33: `True` for an i32 said only "does not fit"; it says a bool is not an int."""
    out = np.zeros(2, np.int64)
    for flag in (True, np.True_):
        with pytest.raises(fl.KernelTypeError, match="a bool is not accepted for an integer") as e:
            put_i32[1, 2](out, flag)
        assert "int(x)" in (e.value.help or "")
    with pytest.raises(fl.KernelTypeError, match="a bool is not accepted for a floating-point"):
        put_f32[1, 2](np.zeros(2, np.float32), False)


# ------------------------------------------------------------------------ bounds


def test_a_guarded_access_one_past_the_index_runs_to_the_edge() -> None:
    """Guard: bounds elimination keeps `a[i + 1]` correct under `if i + 1 < len(a)`: every
    thread in range, including the last, reads its neighbour; the guard proves the checks."""
    a = np.arange(10, dtype=np.float32) ** 2
    out = np.full(10, -1, np.float32)
    diff_guarded[1, 32](a, out)
    np.testing.assert_array_equal(out[:9], np.diff(a))
    assert out[9] == -1  # thread 9 fails `i + 1 < len(a)`
    assert "check.bounds" not in diff_guarded.inspect(stage="ir")


def test_an_unguarded_access_one_past_the_end_is_a_device_check() -> None:
    """Guard: bounds elimination does not remove the check of `a[i + 1]` that `i < len(out)`
    does not prove: the last thread's read is a KernelIndexError from the device check (as
    on the GPU), not the simulator's "unchecked" fault of an access with no check."""
    assert "check.bounds" in diff_unguarded.inspect(stage="ir")
    a = np.arange(10, dtype=np.float32)
    out = np.zeros(10, np.float32)
    with pytest.raises(fl.KernelIndexError, match="the len is 10 but the index is 10") as e:
        diff_unguarded[1, 32](a, out)
    assert "unchecked" not in str(e.value) and "CPU simulator" not in str(e.value)
    assert "block (0, 0, 0), thread (9, 0, 0)" in str(e.value)
    diff_unguarded[1, 32](np.arange(11, dtype=np.float32), out)  # a longer `a`: in range
    np.testing.assert_array_equal(out, np.ones(10, np.float32))


# ------------------------------------------------------------------------ compile-time safety


def test_a_plain_store_to_an_atomic_slice_is_refused_at_launch(tmp_path: Path) -> None:
    """Guard: the frontend's refusal of a plain write to an AtomicSlice (only simt.atomic.*
    may write one), seen from a launch on the simulator: nothing runs."""
    bad = _module(tmp_path, "store_to_atomic", STORE_TO_ATOMIC).bad
    h = np.zeros(8, np.int32)
    with pytest.raises(fl.SafetyError, match="AtomicSlice") as e:
        bad[1, 8](h)
    assert e.value.loc is not None and e.value.loc.file.endswith("store_to_atomic.py")
    assert not h.any()


def test_reading_another_threads_element_of_a_disjoint_slice_is_refused(tmp_path: Path) -> None:
    """Guard: the DisjointSlice read rule (a thread reads only the element its own
    ThreadIndex names), seen from a launch on the simulator."""
    bad = _module(tmp_path, "read_other", READ_OTHER).bad
    out = np.arange(8, dtype=np.float32)
    with pytest.raises(fl.SafetyError) as e:
        bad[1, 8](out)
    assert e.value.loc is not None and e.value.loc.file.endswith("read_other.py")
    assert e.value.loc.line == 10
    np.testing.assert_array_equal(out, np.arange(8, dtype=np.float32))


# ------------------------------------------------------------------------ borrows


def test_two_overlapping_outputs_of_one_launch_are_a_borrow_error() -> None:
    """Guard: borrow.output_pairs lists output-output pairs (not only output-input ones)."""
    buf = np.zeros(16, np.float32)
    for c, d in ((buf[:10], buf[6:]), (buf, buf), (buf[8:], buf[:9])):
        with pytest.raises(fl.BorrowError, match="as mutable because it is also borrowed as "
                           "mutable"):  # fmt: skip
            two_outputs[1, 16](c, d)
    assert not buf.any()
    two_outputs[1, 16](buf[:8], buf[8:])  # disjoint halves of one buffer: fine
    np.testing.assert_array_equal(buf, [1.0] * 8 + [2.0] * 8)


# ------------------------------------------------------------------------ fast variant


def _spy_variants(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which SimKernel of `add`'s launcher runs each launch: "fast" or "general"."""
    launcher: Any = add._launcher()
    assert launcher.fast is not None
    ran: list[str] = []
    for which, sim in (("general", launcher.sim), ("fast", launcher.fast[0])):

        def run(*args: Any, _sim: Any = sim, _which: str = which) -> Any:
            ran.append(_which)
            return type(_sim).run(_sim, *args)

        monkeypatch.setattr(sim, "run", run)
    return ran


def test_the_length_assuming_variant_runs_only_when_its_assumptions_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Guard: the simulator launcher's `holds(fast assumptions)` test: the variant without
    bounds checks (it assumes len(a) >= len(out) and len(b) >= len(out)) runs at and past the
    assumed lengths, the checked one below them, where it reports the read past `a`."""
    ir = add.compiled_ir()
    assert ir.fast is not None
    assert [r.text for r in ir.fast.assumes] == ["len(a) >= len(out)", "len(b) >= len(out)"]
    ran = _spy_variants(monkeypatch)
    x = np.arange(12, dtype=np.float32)
    out = np.zeros(8, np.float32)
    add[1, 32](x[:8], x[:8], out)  # at the assumed lengths
    np.testing.assert_array_equal(out, 2 * x[:8])
    add[1, 32](x, x[2:], out)  # past them
    np.testing.assert_array_equal(out, x[:8] + x[2:10])
    assert ran == ["fast", "fast"]
    with pytest.raises(fl.KernelIndexError, match="the len is 5 but the index is 5") as e:
        add[1, 32](x[:5], x[:8], out)  # below: the checked variant, which reports
    assert ran[-1] == "general"
    assert "unchecked" not in str(e.value)


# ------------------------------------------------------------------------ requires=


def test_requires_refuses_a_violated_relation_and_runs_a_satisfied_one() -> None:
    """Guard: runtime/contract.py check_requires on the simulator."""
    a = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    first_n[1, 8](a, out, 5)
    np.testing.assert_array_equal(out, [0, 1, 2, 3, 4, 0, 0, 0])
    first_n[1, 8](a, out, 8)  # n == len(out): the boundary holds
    np.testing.assert_array_equal(out, a)
    out[:] = 0
    with pytest.raises(fl.LaunchContractError, match=r"contract `n <= len\(out\)`") as e:
        first_n[1, 8](a, out, 9)
    assert "n = 9" in str(e.value)
    with pytest.raises(fl.LaunchContractError, match=r"contract `len\(a\) == len\(out\)`"):
        first_n[1, 8](a[:7], out, 4)
    assert not out.any()  # neither refused launch ran


# ------------------------------------------------------------------------ the disk cache


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],
        lambda data: data.replace(b"add.rn.f32", b"sub.rn.f32"),
        lambda data: data[:-40] + bytes(40),
    ],
    ids=["truncated", "ptx-edited", "garbled-tail"],
)
def test_a_damaged_cache_entry_on_disk_is_compiled_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, damage: Any
) -> None:
    """Guard: cache.load's checks (format, checksum, key): a kernel whose entry was damaged
    on disk compiles again, to the same PTX, and the fresh entry replaces the damaged one."""
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FEARLESS_NO_DISK_CACHE", raising=False)
    ptx = simt.kernel(add.func).compile("sm_90").ptx
    assert "add.rn.f32" in ptx
    (entry,) = tmp_path.rglob("*.pkl")
    data = entry.read_bytes()
    entry.write_bytes(damage(data))
    assert entry.read_bytes() != data
    caplog.set_level(logging.WARNING, "fearless.cache")
    assert simt.kernel(add.func).compile("sm_90").ptx == ptx
    assert any(str(entry) in r.getMessage() for r in caplog.records)
    assert cache.load(entry.stem) is not None  # replaced by a good entry


# ------------------------------------------------------------------------ grids (issue 33)


def test_numpy_integer_grids_are_accepted_everywhere() -> None:
    out = np.zeros(64, np.int64)
    put_i32[np.int64(2), 32](out, 3)
    put_i32[(np.int64(2),), (np.int32(32),)](out, 4)
    put_i32(put_i32.prepare(grid=np.int64(2), block=np.int16(32)), out, 5)
    assert (out == 5).all()


@pytest.mark.parametrize("grid", [1.0, True, np.float64(1.0), (1, True), (1.0,)])
def test_a_float_or_bool_grid_is_refused_even_after_an_equal_int(grid: Any) -> None:
    """`1.0` and `True` hash and compare equal to `1`: the configuration cache must not hand
    them the launch an int grid validated (it did: accepted after `k[1, 32]`)."""
    out = np.zeros(32, np.int64)
    put_i32[1, 32](out, 1)
    put_i32[(1,), 32](out, 1)
    with pytest.raises(fl.LaunchContractError, match="the grid must be an int") as e:
        put_i32[grid, 32](out, 2)
    assert e.value.loc is not None and e.value.loc.file == __file__
    with pytest.raises(fl.LaunchContractError, match="the block must be an int"):
        put_i32[1, 32.0](out, 2)
    assert (out == 1).all()


# ------------------------------------------------------------------------ messages (issue 33)


def test_a_tile_kernel_made_by_exec_says_why_it_cannot_compile() -> None:
    scope: dict[str, Any] = {"fl": fl, "tile": tile}
    exec(
        "@tile.kernel\ndef made(z: tile.Part[fl.f32]):\n    z.store(tile.zeros(z.shape, fl.f32))\n",
        scope,
    )
    with pytest.raises(fl.CompileError, match="cannot read the source of `made`") as e:
        scope["made"](fl.zeros(16).partition((16,)))
    assert "inspect.getsource" in str(e.value)
    assert "exec()" in (e.value.help or "") and ".py file" in (e.value.help or "")


def test_the_simulators_thread_limit_says_it_is_the_simulators() -> None:
    out = np.zeros(8, np.int64)
    with pytest.raises(fl.LaunchContractError, match="more than the simulator runs") as e:
        put_i32[2**20, 128](out, 1)
    text = str(e.value)
    assert "the simulator's limit (FEARLESS_SIM_MAX_THREADS), not CUDA's" in text
    assert "67,108,864" in text and "smaller input" in (e.value.help or "")
    assert "FEARLESS_TARGET=cuda" in (e.value.help or "")
