"""The launch path without a GPU: the borrow check, the error pool on host memory, and a
GpuLaunchPlan driving a recording stand-in for cuLaunchKernel (the real driver calls are
exercised by tests/gpu/test_runtime_gpu.py)."""

from __future__ import annotations

import ctypes
import random
import struct
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config
from fearless.abi import (
    ERROR_RECORD_BYTES,
    CompiledKernel,
    ParamSpec,
)
from fearless.errors import Location
from fearless.runtime import arrays, borrow, device_errors, driver
from fearless.runtime.streams import Stream
from fearless.runtime.target import Target
from fearless.runtime.tensor import Tensor
from support import fake_driver
from support.fake_driver import (
    F32,
    FakeDriver,
    HostErrorPool,
    _dev,
    _kernel,
    _plan,
    _specs,
    _write_record,
)

fake_gpu = fake_driver.fake_gpu  # the fixture (tests/support/fake_driver.py)


def _host_info(a: np.ndarray) -> arrays.ArrayInfo:
    return arrays.describe(a, Target.SIM, ndim=None)


# ------------------------------------------------------------------------------ borrow check


def test_output_overlapping_an_input_is_a_borrow_error() -> None:
    buf = np.zeros(1024, np.float32)
    b = np.zeros(1024, np.float32)
    specs = _specs("slice", "slice", "disjoint")
    with pytest.raises(fl.BorrowError) as err:
        borrow.check_borrows(specs, [_host_info(buf), _host_info(b), _host_info(buf)])
    e = err.value
    assert e.message == "cannot borrow `c` as mutable because it is also borrowed as immutable"
    assert e.diagnostic.notes == ["`a` overlaps bytes [0, 4096) of `c`"]
    assert e.loc is not None and e.loc.file == __file__
    assert e.help and "memory of its own" in e.help


def test_partial_overlap_reports_the_shared_bytes() -> None:
    buf = np.zeros(1024, np.float32)
    specs = _specs("slice", "disjoint")
    with pytest.raises(fl.BorrowError) as err:
        borrow.check_borrows(specs, [_host_info(buf[0:512]), _host_info(buf[256:768])])
    assert err.value.diagnostic.notes == ["`a` overlaps bytes [0, 1024) of `b`"]


def test_two_outputs_sharing_memory_name_the_later_one() -> None:
    buf = np.zeros(16, np.float32)
    specs = _specs("disjoint", "slice", "disjoint")
    other = np.zeros(4, np.float32)
    with pytest.raises(fl.BorrowError) as err:
        borrow.check_borrows(specs, [_host_info(buf[:8]), _host_info(other), _host_info(buf[4:])])
    assert (
        err.value.message == "cannot borrow `c` as mutable because it is also borrowed as mutable"
    )
    assert err.value.diagnostic.notes == ["`a` overlaps bytes [0, 16) of `c`"]


def test_what_the_borrow_check_allows() -> None:
    buf = np.zeros(1024, np.float32)
    specs = _specs("slice", "slice", "disjoint")
    # disjoint views of one buffer
    borrow.check_borrows(
        specs, [_host_info(buf[:512]), _host_info(buf[:512]), _host_info(buf[512:])]
    )
    # the same input twice, and adjacent ranges that touch without sharing a byte
    borrow.check_borrows(
        specs, [_host_info(buf[:10]), _host_info(buf[:10]), _host_info(buf[10:20])]
    )
    # zero-size arrays overlap nothing, even inside another array's range
    borrow.check_borrows(specs, [_host_info(buf), _host_info(buf), _host_info(buf[100:100])])
    borrow.check_borrows(_specs("disjoint", "slice"), [_host_info(buf[5:5]), _host_info(buf)])
    # scalars (None) are skipped; no outputs means nothing to check
    borrow.check_borrows(
        _specs("slice", "scalar", "slice"), [_host_info(buf), None, _host_info(buf)]
    )


def test_two_wrappers_of_one_numpy_buffer_collide(monkeypatch: pytest.MonkeyPatch) -> None:
    from fearless.runtime import tensor

    monkeypatch.setattr(config, "_target_override", "sim")
    a = np.arange(64, dtype=np.float32)
    x, y = tensor.asarray(a), tensor.asarray(a)
    with pytest.raises(fl.BorrowError):
        borrow.check_borrows(
            _specs("slice", "disjoint"),
            [arrays.describe(x, Target.SIM), arrays.describe(y, Target.SIM)],
        )


def _brute(starts: list[int], ends: list[int], outs: list[bool]) -> set[tuple[int, int]]:
    hits = set()
    for i in range(len(starts)):
        for j in range(len(starts)):
            overlap = starts[i] < ends[j] and starts[j] < ends[i]
            empty = starts[i] == ends[i] or starts[j] == ends[j]
            if i != j and outs[i] and overlap and not empty:
                hits.add((i, j))
    return hits


@pytest.mark.parametrize("seed", range(40))
def test_pairwise_and_sorted_sweep_agree_with_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 14)
    starts = [rng.randrange(0, 200) for _ in range(n)]
    ends = [s + rng.choice([0, 1, 5, 40]) for s in starts]
    outs = [rng.random() < 0.3 for _ in range(n)]
    expected = _brute(starts, ends, outs)
    for pairs in (borrow.output_pairs(outs), None):
        hit = borrow.find_overlap(starts, ends, outs, pairs if n <= borrow.PAIRWISE_MAX else None)
        if expected:
            assert hit is not None and (hit in expected or hit[::-1] in expected)
            assert outs[hit[0]]
        else:
            assert hit is None


# ----------------------------------------------------------------------------- error pool


def test_error_pool_grows_and_reports_the_first_error() -> None:
    pool = HostErrorPool(chunk_slots=4)
    slots = [pool.alloc(_kernel(f"k{i}")) for i in range(6)]  # two chunks
    assert [s for s, _ in slots] == list(range(6))
    assert len(pool._chunks) == 2
    assert slots[1][1] - slots[0][1] == ERROR_RECORD_BYTES
    pool.check(upto=0)
    assert pool.copies == 0  # nothing launched: nothing copied
    pool.mark_launched(5)
    pool.check(upto=pool.launches)
    assert pool.copies == 2  # one memcpy per chunk, clean
    pool.check()
    assert pool.copies == 2  # checked already
    _write_record(slots[5][1], [1, 2, 3, 0, 0, 17, 0, 0, 1024, 1000])
    pool.mark_launched(5)
    with pytest.raises(fl.KernelIndexError, match="the len is 1000 but the index is 1024") as err:
        pool.check(upto=pool.launches)
    assert "kernel `k5`, block (3, 0, 0), thread (17, 0, 0)" in err.value.diagnostic.notes[0]
    assert err.value.loc == Location("k.py", 7, 8)
    assert pool.syncs == 1  # the error path waits for every stream before trusting the record
    record = np.frombuffer(ctypes.string_at(slots[5][1], ERROR_RECORD_BYTES), np.int64)
    assert not record.any()  # zeroed: the kernel can run again
    pool.check(upto=pool.launches)  # and the pool reads clean afterwards


def test_error_pool_reports_several_errors_one_at_a_time() -> None:
    pool = HostErrorPool()
    (s0, a0), (_, a1) = pool.alloc(_kernel("first")), pool.alloc(_kernel("second"))
    _write_record(a0, [1, 0, 0, 0, 0, 0, 0, 0, 9, 8])
    _write_record(a1, [1, 0, 0, 0, 0, 0, 0, 0, 5, 4])
    pool.mark_launched(s0)
    with pytest.raises(fl.KernelIndexError, match="`first`"):
        pool.check(pool.launches)
    with pytest.raises(fl.KernelIndexError, match="`second`"):
        pool.check(pool.launches)
    pool.check(pool.launches)


# ------------------------------------------------------------------- plan with a fake driver


def test_large_1d_launches_run_the_coarsened_entry(fake_gpu: FakeDriver) -> None:
    ck = _kernel()
    ck.coarse_entry, ck.coarsen = "fearless_vecadd_x4", 4
    functions: list[Any] = []
    real = fake_gpu.cuLaunchKernel

    def record(f: Any, *rest: Any) -> tuple[Any]:
        functions.append(f)
        return real(f, *rest)

    fake_gpu.cuLaunchKernel = record  # type: ignore[method-assign]
    plan, _ = _plan(fake_gpu, ck)  # built after the patch: its launcher calls `record`
    n = 1 << 24
    a, b, c = _dev(0x10000, n), _dev(0x10000 + 4 * n, n), _dev(0x10000 + 8 * n, n)
    grid = n // 256  # 65536 blocks >= 4 * 8 * 132
    plan.launch(grid, 256, (a, b, c))
    assert functions[-1] == "CUfunction_x4"
    assert fake_gpu.calls[-1]["grid"] == (grid // 4, 1, 1)
    logical = struct.unpack_from("<q", fake_gpu.calls[-1]["bytes"], 48)[0]
    assert logical == grid * 256  # the coarsened kernel skips logical threads past this
    plan.launch(5, 256, (a, b, c))  # small: every block is needed to fill the GPU
    assert functions[-1] == "CUfunction" and fake_gpu.calls[-1]["grid"] == (5, 1, 1)


def test_fast_variant_runs_only_when_its_length_assumptions_hold(fake_gpu: FakeDriver) -> None:
    from fearless.abi import Requirement

    ck = _kernel()
    ck.fast_entry = "fearless_vecadd_fast"
    ck.fast_assumes = (
        Requirement("len(a) >= len(c)", "(__len_0) >= (__len_2)", ("a", ">=", "c")),
        Requirement("len(b) >= len(c)", "(__len_1) >= (__len_2)", ("b", ">=", "c")),
    )
    functions: list[Any] = []
    real = fake_gpu.cuLaunchKernel

    def record(f: Any, *rest: Any) -> tuple[Any]:
        functions.append(f)
        return real(f, *rest)

    fake_gpu.cuLaunchKernel = record  # type: ignore[method-assign]
    plan, _ = _plan(fake_gpu, ck)
    assert "fnc = fast" in plan.launcher_source
    c = _dev(0x90000, 1000)
    plan.launch(4, 256, (_dev(0x10000, 1000), _dev(0x20000, 1000), c))
    assert functions[-1] == "CUfunction_fast"  # both inputs are as long as the output
    plan.launch(4, 256, (_dev(0x10000, 1000), _dev(0x20000, 999), c))
    assert functions[-1] == "CUfunction"  # `b` is shorter: the checked kernel runs


def test_plan_packs_pointers_lengths_and_error_record(fake_gpu: FakeDriver) -> None:
    plan, pool = _plan(fake_gpu)
    a, b, c = _dev(0x10000, 1000), _dev(0x20000, 1000), _dev(0x30000, 1000)
    plan.launch(4, 256, (a, b, c))
    call = fake_gpu.calls[-1]
    assert call["grid"] == (4, 1, 1) and call["block"] == (256, 1, 1) and call["stream"] == 0
    record = pool._record_address(plan.slot)
    assert call["bytes"] == struct.pack(
        "<QqQqQqqQ", 0x10000, 1000, 0x20000, 1000, 0x30000, 1000, 1024, record
    )
    assert pool.launches == 1
    plan.launch(2, 16, (a, b, c), stream=0x7000)
    assert fake_gpu.calls[-1]["grid"] == (2, 1, 1) and fake_gpu.calls[-1]["stream"] == 0x7000
    plan.launch(1, 32, (a, b, c), stream=Stream(0x8000))
    assert fake_gpu.calls[-1]["stream"] == 0x8000
    assert (4, 256) in plan._dims  # validated once, remembered


def test_plan_runs_the_borrow_check(fake_gpu: FakeDriver) -> None:
    plan, pool = _plan(fake_gpu)
    a, b = _dev(0x10000, 1000), _dev(0x20000, 1000)
    with pytest.raises(fl.BorrowError) as err:
        plan.launch(4, 256, (a, b, a))
    assert err.value.diagnostic.notes == ["`a` overlaps bytes [0, 4000) of `c`"]
    assert err.value.loc is not None and err.value.loc.file == __file__
    assert not fake_gpu.calls and pool.launches == 0  # nothing ran
    plan.launch(4, 256, (a, b, _dev(0x10000 + 4000, 10)))  # touching, not overlapping
    plan.launch(4, 256, (a, b, _dev(0x10000 + 400, 0)))  # empty output inside `a`
    assert len(fake_gpu.calls) == 2


def test_plan_refuses_wrong_arguments(
    fake_gpu: FakeDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, _ = _plan(fake_gpu)
    a, c = _dev(0x10000, 8), _dev(0x30000, 8)
    with pytest.raises(
        fl.KernelTypeError, match="`b` has element type f64, but `vecadd` expects f32"
    ) as e:
        plan.launch(1, 8, (a, _dev(0x20000, 8, fl.f64), c))
    assert "float32" in (e.value.help or "")
    # NumPy arrays are copied to the GPU (test_host_arrays.py), after the same checks
    with pytest.raises(fl.KernelTypeError, match="`b` has element type f64, but `vecadd`"):
        plan.launch(1, 8, (a, np.zeros(8, np.float64), c))
    monkeypatch.setattr(config, "_target_override", "sim")
    from fearless.runtime import tensor

    with pytest.raises(fl.KernelTypeError, match="`c` is in host memory"):
        plan.launch(1, 8, (a, a, tensor.zeros(8)))
    with pytest.raises(fl.KernelTypeError, match="`a` of type `int` is not an array"):
        plan.launch(1, 8, (5, a, c))
    with pytest.raises(
        fl.KernelTypeError, match=r"takes 3 arguments \(a, b, c\) but 2 were given"
    ) as e2:
        plan.launch(1, 8, (a, c))
    assert e2.value.diagnostic.code == "E0061"
    assert not fake_gpu.calls


def test_plan_checks_scalars(fake_gpu: FakeDriver) -> None:
    params = (
        ParamSpec("c", "disjoint", F32),
        ParamSpec("n", "scalar", fl.i32),
        ParamSpec("s", "scalar", fl.bf16),
        ParamSpec("flag", "scalar", fl.bool_),
    )
    plan, pool = _plan(fake_gpu, _kernel("scale", params))
    c = _dev(0x10000, 8)
    plan.launch(1, 8, (c, 7, 1.0, True))
    record = pool._record_address(plan.slot)
    assert fake_gpu.calls[-1]["bytes"] == struct.pack(
        "<QqiH?xqQ", 0x10000, 8, 7, 0x3F80, True, 8, record
    )
    with pytest.raises(
        fl.KernelTypeError, match=r"`n` = 1099511627776 does not fit the parameter's type i32"
    ):
        plan.launch(1, 8, (c, 2**40, 1.0, True))
    with pytest.raises(fl.KernelTypeError, match=r"`n` = 1\.5 does not fit"):
        plan.launch(1, 8, (c, 1.5, 1.0, True))
    with pytest.raises(
        fl.KernelTypeError, match="`flag` = 1 does not fit the parameter's type bool"
    ):
        plan.launch(1, 8, (c, 1, 1.0, 1))
    assert len(fake_gpu.calls) == 1


def test_plan_checks_the_launch_contract(fake_gpu: FakeDriver) -> None:
    plan, _ = _plan(fake_gpu, _kernel(block=(256, 1, 1), launch_bounds=256))
    a, b, c = _dev(0x10000, 8), _dev(0x20000, 8), _dev(0x30000, 8)
    with pytest.raises(
        fl.LaunchContractError,
        match=r"must be launched with block=\(256, 1, 1\), not block=\(128, 1, 1\)",
    ) as e:
        plan.launch(1, 128, (a, b, c))
    assert e.value.loc is not None and e.value.loc.file == __file__ and e.value.help
    plan.launch(1, (256,), (a, b, c))
    bounded, _ = _plan(fake_gpu, _kernel(launch_bounds=128))
    with pytest.raises(
        fl.LaunchContractError, match="256 threads exceeds `vecadd`'s launch_bounds=128"
    ):
        bounded.launch(1, 256, (a, b, c))
    free, _ = _plan(fake_gpu, _kernel(index_dims=3))
    with pytest.raises(fl.LaunchContractError, match="64 registers per thread, which allows 512"):
        free.launch(1, 1024, (a, b, c))
    with pytest.raises(fl.LaunchContractError, match="the grid has 0 along x"):
        free.launch(0, 32, (a, b, c))
    with pytest.raises(
        fl.LaunchContractError,
        match="the grid has 70000 along y, above the device's limit of 65535",
    ):
        free.launch((1, 70000), 32, (a, b, c))
    with pytest.raises(
        fl.LaunchContractError, match="the block has 128 along z, above the device's limit of 64"
    ):
        free.launch(1, (1, 1, 128), (a, b, c))
    with pytest.raises(fl.LaunchContractError, match="the grid must be an int or a tuple"):
        free.launch("4", 32, (a, b, c))
    with pytest.raises(fl.LaunchContractError, match="the block must be an int or a tuple"):
        free.launch(4, (1, 2, 3, 4), (a, b, c))
    free.launch(np.int64(2), np.int32(32), (a, b, c))  # NumPy ints are ints
    with pytest.raises(fl.LaunchContractError, match="the grid must be an int"):
        free.launch(2.5, 32, (a, b, c))
    free.launch([2, 2], [8, 4], (a, b, c))  # lists work, just without the memo
    assert fake_gpu.calls[-1]["grid"] == (2, 2, 1)
    one_d, _ = _plan(fake_gpu)  # index_1d: a 2-D launch would give two threads one index
    with pytest.raises(fl.LaunchContractError, match=r"index_1d\(\), which needs a 1-D launch"):
        one_d.launch((2, 2), 32, (a, b, c))
    two_d, _ = _plan(fake_gpu, _kernel(index_dims=2))
    two_d.launch((2, 2), (8, 8), (a, b, c))
    with pytest.raises(fl.LaunchContractError, match="index_2d"):
        two_d.launch(1, (8, 8, 2), (a, b, c))


def test_plan_with_many_arrays_uses_the_sorted_sweep(fake_gpu: FakeDriver) -> None:
    params = _specs(*(["slice"] * 9), "disjoint")
    plan, _ = _plan(fake_gpu, _kernel("wide", params))
    ins = [_dev(0x1000 * (i + 1), 16) for i in range(9)]
    plan.launch(1, 16, (*ins, _dev(0x100000, 16)))
    with pytest.raises(fl.BorrowError, match="cannot borrow `j` as mutable") as err:
        plan.launch(1, 16, (*ins, _dev(0x5000 + 8, 16)))
    assert err.value.diagnostic.notes == ["`e` overlaps bytes [0, 56) of `j`"]


def test_plan_relaunches_once_on_a_thread_without_context(
    fake_gpu: FakeDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, pool = _plan(fake_gpu)
    made_current: list[bool] = []
    monkeypatch.setattr(driver, "make_current", lambda: made_current.append(True))
    monkeypatch.setattr(driver, "result_text", lambda d, err: "CUDA_ERROR_X")
    a, b, c = _dev(0x10000, 8), _dev(0x20000, 8), _dev(0x30000, 8)
    fake_gpu.results = [fake_gpu.CUresult.CUDA_ERROR_INVALID_CONTEXT]
    plan.launch(1, 8, (a, b, c))
    assert made_current == [True] and len(fake_gpu.calls) == 2 and pool.launches == 1
    fake_gpu.results = [fake_gpu.CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES]
    with pytest.raises(
        fl.ToolchainError,
        match=r"launching `vecadd` with grid=\(1, 1, 1\) block=\(8, 1, 1\) failed",
    ):
        plan.launch(1, 8, (a, b, c))


def test_sync_knob_synchronises_after_each_launch(
    fake_gpu: FakeDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, _ = _plan(fake_gpu)
    synced: list[int] = []
    monkeypatch.setattr(device_errors, "synchronize", lambda: synced.append(1))
    a, b, c = _dev(0x10000, 8), _dev(0x20000, 8), _dev(0x30000, 8)
    plan.launch(1, 8, (a, b, c))
    assert synced == []
    monkeypatch.setenv("FEARLESS_SYNC", "1")
    plan.launch(1, 8, (a, b, c))
    assert synced == [1]


# --------------------------------------------------------------------------- 2-D parameters


def _kernel_2d() -> CompiledKernel:
    """matadd's signature: a, b (2-D Slices), c (a 2-D DisjointSlice), index_dims 2."""
    params = tuple(
        ParamSpec(n, k, F32, 2)  # type: ignore[arg-type]
        for n, k in (("a", "slice"), ("b", "slice"), ("c", "disjoint"))
    )
    ck = _kernel("matadd", params, index_dims=2)
    return ck


def _dev2(ptr: int, rows: int, cols: int, dtype: Any = F32) -> Tensor:
    return Tensor._make(ptr, (rows, cols), dtype, on_device=True, owner=None)


def test_plan_packs_pointer_then_both_extents_of_2d_arrays(fake_gpu: FakeDriver) -> None:
    plan, pool = _plan(fake_gpu, _kernel_2d())
    assert plan.packer.count == 3 * 3 + 2  # (ptr, rows, cols) per array, threads, err
    a, b, c = _dev2(0x10000, 37, 53), _dev2(0x20000, 37, 53), _dev2(0x30000, 37, 53)
    plan.launch((4, 3), (16, 16), (a, b, c))
    call = fake_gpu.calls[-1]
    assert call["grid"] == (4, 3, 1) and call["block"] == (16, 16, 1)
    record = pool._record_address(plan.slot)
    assert call["bytes"] == struct.pack(
        "<QqqQqqQqqqQ",
        0x10000, 37, 53, 0x20000, 37, 53, 0x30000, 37, 53, 4 * 3 * 256, record,
    )  # fmt: skip
    assert "launch_extractor_2d" in plan.launcher_source


def test_plan_borrow_checks_2d_byte_ranges(fake_gpu: FakeDriver) -> None:
    plan, _ = _plan(fake_gpu, _kernel_2d())
    a, b = _dev2(0x10000, 10, 10), _dev2(0x20000, 10, 10)
    with pytest.raises(fl.BorrowError) as err:
        plan.launch((1, 1), (16, 16), (a, b, _dev2(0x10000 + 396, 2, 2)))
    assert err.value.diagnostic.notes == ["`a` overlaps bytes [0, 4) of `c`"]
    plan.launch((1, 1), (16, 16), (a, b, _dev2(0x10000 + 400, 5, 5)))  # right after `a`
    assert len(fake_gpu.calls) == 1


def test_plan_refuses_wrong_2d_arguments(fake_gpu: FakeDriver) -> None:
    plan, _ = _plan(fake_gpu, _kernel_2d())
    a, c = _dev2(0x10000, 8, 8), _dev2(0x30000, 8, 8)
    with pytest.raises(fl.KernelTypeError, match="`b` has 1 dimension, but kernels take 2-D") as e:
        plan.launch((1, 1), (8, 8), (a, _dev(0x20000, 64), c))
    assert e.value.diagnostic.code == "E0701" and "reshape" in (e.value.help or "")
    with pytest.raises(fl.KernelTypeError, match="`c` has element type f64, but `matadd`"):
        plan.launch((1, 1), (8, 8), (a, a, _dev2(0x30000, 8, 8, fl.f64)))
    with pytest.raises(fl.KernelTypeError, match="`b` has 1 dimension, but kernels take 2-D"):
        plan.launch((1, 1), (8, 8), (a, np.zeros(64, np.float32), c))  # NumPy: checked alike
    with pytest.raises(fl.LaunchContractError, match=r"index_2d\(\), which needs a 2-D launch"):
        plan.launch((1, 1, 2), (8, 8), (a, a, c))
    assert not fake_gpu.calls
    # 1-D parameters refuse 2-D tensors on the warm path too
    plan1, _ = _plan(fake_gpu)
    with pytest.raises(fl.KernelTypeError, match="`a` has 2 dimensions, but kernels take 1-D"):
        plan1.launch(1, 8, (a, _dev(0x20000, 8), _dev(0x40000, 8)))


def test_2d_extractors_read_shape_and_refuse_what_they_cannot_take() -> None:
    t = _dev2(0x5000, 6, 7)
    ex = arrays.launch_extractor_2d(Tensor)
    assert ex is not None and ex(t) == (0x5000, 6, 7, F32)
    assert ex(_dev(0x5000, 42)) is None  # 1-D
    assert ex(Tensor._make(0x5000, (6, 7), F32, on_device=False, owner=None)) is None
    assert arrays.launch_extractor_2d(np.ndarray) is None  # host memory: describe explains
    from fearless.runtime.params import ParamPacker

    packer = ParamPacker(_kernel_2d().params)
    packer.set(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
    assert struct.unpack_from("<Qqq", packer.to_bytes(), 0) == (1, 2, 3)


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch: nested and CSR are prototypes
def test_a_nested_or_sparse_torch_tensor_is_e0701_on_the_gpu_path(fake_gpu: FakeDriver) -> None:
    # the generated launcher read `.shape` (a nested tensor's raises) and `.is_contiguous()`
    # (a sparse CSR tensor's raises): raw RuntimeErrors from inside fearless
    torch = pytest.importorskip("torch")
    plan, _ = _plan(fake_gpu)
    a, c = _dev(0x10000, 4), _dev(0x30000, 4)
    nested = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
    csr = torch.eye(4).to_sparse_csr()
    for bad in (nested, csr):
        with pytest.raises(fl.KernelTypeError) as err:
            plan.launch(1, 32, (a, bad, c))
        assert err.value.code == "E0701"
