"""The compiled warm launcher (runtime/claunch.py, claunch_simt.c) on the CPU: a fake driver's
cuLaunchKernel (a ctypes callback) stands for libcuda's. For each signature the C path must
pack exactly the bytes the Python launcher packs, and hand back to it (launching nothing)
whatever is not the common case, so that the Python launcher raises its own error."""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import dtypes, tile
from fearless.abi import ParamSpec, Requirement
from fearless.runtime import claunch, launch
from fearless.runtime.tensor import Tensor
from support.fake_claunch import (
    FUNCTION,
    Calls,
    TileCu,
    c_driver,  # noqa: F401 (a fixture)
    tile_c,  # noqa: F401 (a fixture)
)
from support.fake_driver import FakeDriver, HostErrorPool, _kernel, fake_gpu  # noqa: F401


def _plan(fake: FakeDriver, params: tuple[ParamSpec, ...]) -> launch.GpuLaunchPlan:
    plan = launch.GpuLaunchPlan(_kernel("k", params), pool=HostErrorPool())
    fake.plan = plan
    return plan


def _dev(ptr: int, shape: tuple[int, ...], dtype: Any = dtypes.f32) -> Tensor:
    return Tensor._make(ptr, shape, dtype, on_device=True, owner=None)


F32 = dtypes.f32
SAXPY = (
    ParamSpec("a", "scalar", F32),
    ParamSpec("x", "slice", F32),
    ParamSpec("y", "slice", F32),
    ParamSpec("out", "disjoint", F32),
    ParamSpec("n", "scalar", dtypes.i32),
)


def test_the_c_path_synchronises_under_fearless_sync(
    fake_gpu: FakeDriver,  # noqa: F811
    c_driver: Calls,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The generated launcher tests FEARLESS_SYNC inline after a C launch, as it is now."""
    from fearless.runtime import device_errors

    plan = _plan(fake_gpu, SAXPY)
    synced: list[int] = []
    monkeypatch.setattr(device_errors, "synchronize", lambda: synced.append(1))
    x, y, out = _dev(0x10000, (1000,)), _dev(0x20000, (1000,)), _dev(0x30000, (1000,))
    for value, want in (
        *(("0", []), ("1", [1]), ("", [1]), ("false", [1]), ("OFF", [1])),
        *(("yes", [1, 1]), ("TRUE", [1, 1, 1])),  # config.flag's words, in any case (issue 33)
    ):
        monkeypatch.setenv("FEARLESS_SYNC", value)
        plan.launch(4, 256, (2.5, x, y, out, -7))
        assert synced == want, value
    assert len(c_driver) == 7 and not fake_gpu.calls


def test_the_c_path_packs_what_the_python_path_packs(
    fake_gpu: FakeDriver,  # noqa: F811
    c_driver: Calls,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = _plan(fake_gpu, SAXPY)
    assert plan.cplan is not None and "claunch(cplan" in plan.launcher_source
    x, y, out = _dev(0x10000, (1000,)), _dev(0x20000, (1000,)), _dev(0x30000, (1000,))
    plan.launch(4, 256, (2.5, x, y, out, -7))
    assert len(c_driver) == 1 and not fake_gpu.calls  # C launched, cuda.bindings did not
    c = c_driver[0]
    assert c["f"] == FUNCTION and c["grid"] == (4, 1, 1) and c["block"] == (256, 1, 1)
    monkeypatch.setattr(plan, "cplan", None)
    python = launch.build_launcher(plan, launch._PACK_ERRORS)[0]
    python(4, 256, (2.5, x, y, out, -7))
    assert fake_gpu.calls[0]["bytes"] == c["bytes"]  # the same bytes, error record included
    assert plan.pool.launches == 2


def test_2d_arrays_and_every_scalar_width(
    fake_gpu: FakeDriver,  # noqa: F811
    c_driver: Calls,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kinds = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64")
    params = (
        ParamSpec("m", "slice", F32, 2),
        *(ParamSpec(f"s{i}", "scalar", dtypes.BY_NAME[k]) for i, k in enumerate(kinds)),
        ParamSpec("out", "disjoint", F32, 2),
    )
    plan = launch.GpuLaunchPlan(_kernel("k", params, index_dims=2), pool=HostErrorPool())
    fake_gpu.plan = plan
    assert plan.cplan is not None
    values = (-5, -300, -70000, -(2**40), 200, 60000, 2**31 + 5, 2**63 + 1, 1.5, -2.25)
    m, out = _dev(0x10000, (3, 7)), _dev(0x20000, (3, 7))
    plan.launch((2, 2), (16, 16), (m, *values, out))
    assert len(c_driver) == 1 and c_driver[0]["grid"] == (2, 2, 1)
    monkeypatch.setattr(plan, "cplan", None)
    launch.build_launcher(plan, launch._PACK_ERRORS)[0]((2, 2), (16, 16), (m, *values, out))
    assert fake_gpu.calls[0]["bytes"] == c_driver[0]["bytes"]
    assert struct.unpack_from("<Qqq", c_driver[0]["bytes"]) == (0x10000, 3, 7)


@pytest.mark.parametrize(
    "case",
    ["numpy", "wrong-dtype", "overlap", "bool-scalar", "too-big", "f32-overflow", "moved"],
)
def test_irregular_launches_fall_back_to_the_python_launcher(
    fake_gpu: FakeDriver,  # noqa: F811
    c_driver: Calls,  # noqa: F811
    case: str,
) -> None:
    plan = _plan(fake_gpu, SAXPY)
    x, y, out = _dev(0x10000, (1000,)), _dev(0x20000, (1000,)), _dev(0x30000, (1000,))
    args: list[Any] = [2.5, x, y, out, 7]
    error: type[Exception] = fl.KernelTypeError
    if case == "numpy":
        args[1] = np.zeros(1000, np.float32)  # copied in by the Python launcher (no raise)
        error = Exception
    elif case == "wrong-dtype":
        args[2] = _dev(0x20000, (1000,), dtypes.f64)
    elif case == "overlap":
        args[3], error = x, fl.BorrowError
    elif case == "bool-scalar":
        args[4] = True
    elif case == "too-big":
        args[4] = 2**31
    elif case == "f32-overflow":
        args[0] = 1e300
    elif case == "moved":
        out.partition((256,))
        error = fl.MovedError
    if case == "numpy":
        return  # staging needs a real device: what matters is that C did not take it
    with pytest.raises(error):
        plan.launch(4, 256, tuple(args))
    assert not c_driver and not fake_gpu.calls  # nothing launched on either path


def test_plans_outside_the_common_case_have_no_c_plan() -> None:
    assert not claunch.eligible((ParamSpec("b", "scalar", dtypes.bool_),))
    assert not claunch.eligible((ParamSpec("h", "scalar", dtypes.f16),))
    scalar_relation = Requirement("n <= len(x)", "(__arg_4) <= (__len_1)")
    assert not claunch.eligible(SAXPY, (scalar_relation,))  # only lengths are compared in C
    lengths = Requirement("len(out) == len(x)", "(__len_3) == (__len_1)", ("out", "==", "x"))
    assert claunch.eligible(SAXPY, (lengths,))
    assert claunch.eligible(SAXPY)


def test_the_driver_refusing_goes_to_the_python_launcher(
    fake_gpu: FakeDriver,  # noqa: F811
    c_driver: Calls,  # noqa: F811
) -> None:
    plan = _plan(fake_gpu, SAXPY)
    c_driver.result = 201  # CUDA_ERROR_INVALID_CONTEXT
    x, y, out = _dev(0x10000, (1000,)), _dev(0x20000, (1000,)), _dev(0x30000, (1000,))
    plan.launch(4, 256, (2.5, x, y, out, 7))
    assert len(c_driver) == 1 and len(fake_gpu.calls) == 1  # the Python launcher retried


def test_requires_relations_and_the_fast_variant_in_c(
    fake_gpu: FakeDriver,  # noqa: F811
    c_driver: Calls,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast_function = 0xFA57
    monkeypatch.setattr(
        launch.driver,
        "load_kernel",
        lambda ck: launch.driver.LoadedKernel(
            ck.name, ck.entry, FUNCTION, 1, None, 512, 64, "ptx", fast_function=fast_function
        ),
    )
    params = SAXPY[1:4]  # x, y, out
    ck = _kernel(
        "k",
        params,
        requires=(Requirement("len(y) == len(x)", "(__len_1) == (__len_0)", ("y", "==", "x")),),
    )
    ck.fast_entry = "fearless_k_fast"
    ck.fast_assumes = (
        Requirement("len(x) >= len(out)", "(__len_0) >= (__len_2)", ("x", ">=", "out")),
    )
    plan = launch.GpuLaunchPlan(ck, pool=HostErrorPool())
    fake_gpu.plan = plan
    assert plan.cplan is not None
    x, y = _dev(0x10000, (1000,)), _dev(0x20000, (1000,))
    plan.launch(4, 256, (x, y, _dev(0x30000, (1000,))))  # len(x) >= len(out): the fast one
    plan.launch(4, 256, (x, y, _dev(0x30000, (2000,))))  # it does not: the checked one
    assert [c["f"] for c in c_driver] == [fast_function, FUNCTION]
    with pytest.raises(fl.LaunchContractError, match="len"):
        plan.launch(4, 256, (x, _dev(0x20000, (999,)), _dev(0x30000, (1000,))))
    assert len(c_driver) == 2 and not fake_gpu.calls


# ------------------------------------------------------------------------------- Tile launches


def _tile_signature() -> tuple[Any, ...]:
    from fearless.abi import TileParam

    return (
        TileParam("out", "part", F32, 2, tile=(16, 64)),
        TileParam("x", "tensor", F32, 2),
        TileParam("eps", "scalar", F32),
        TileParam("HALF", "const", dtypes.i32, value=8),
        TileParam("n", "scalar", dtypes.i64),
        TileParam("flag", "scalar", dtypes.bool_),
    )


def _tile_launch() -> Any:
    from fearless.runtime import tile_gpu

    params = tile_gpu.ParamBlock(_tile_signature(), [(100, 300), (100, 600)])
    return tile_gpu.GpuLaunch("k", FUNCTION, (7, 5, 1), params)


def test_a_tile_launch_packs_in_c_what_python_packs(
    tile_c: tuple[Calls, TileCu],  # noqa: F811
) -> None:
    calls, cu = tile_c
    gpu = _tile_launch()
    assert gpu._cplan is not None
    values = [0x7F0000001000, 0x7F0000200000, 1.5e-5, -(2**40), True]
    gpu(values, None)
    assert len(calls) == 1 and not cu.calls
    c = calls[0]
    assert c["f"] == FUNCTION and c["grid"] == (7, 5, 1) and c["block"] == (1, 1, 1)
    gpu._c_launch = None  # the Python path, on the same values
    gpu(values, None)
    assert cu.calls == [c["bytes"]]
    assert c["bytes"][1:4] == [struct.pack("<i", v) for v in (100, 300, 300)]


@pytest.mark.parametrize(
    "values",
    [
        [0x1000, 0x2000, 1.0, 2**63, True],  # past i64: struct raises, C hands it back
        [0x1000, 0x2000, 1e300, 1, True],  # past f32
        [0x1000, 0x2000, 1.0, True, True],  # a bool for an int
        [0x1000, 0x2000, 1.0, 1, 1],  # an int for a bool
        [-1, 0x2000, 1.0, 1, True],  # a negative pointer
    ],
)
def test_a_tile_value_c_does_not_pack_goes_the_python_way(
    tile_c: tuple[Calls, TileCu],  # noqa: F811
    values: list[Any],
) -> None:
    calls, _ = tile_c
    gpu = _tile_launch()
    with contextlib.suppress(struct.error, OverflowError):  # the Python path's own refusal
        gpu(values, None)
    assert not calls  # C launched nothing (the warm path never gives such values)


def test_a_driver_error_in_c_is_retried_by_the_python_path(
    tile_c: tuple[Calls, TileCu],  # noqa: F811
) -> None:
    calls, cu = tile_c
    calls.result = 201
    _tile_launch()([0x1000, 0x2000, 1.0, 3, False], None)
    assert len(calls) == 1 and len(cu.calls) == 1


def test_bf16_scalars_keep_the_python_path(
    tile_c: tuple[Calls, TileCu],  # noqa: F811
) -> None:
    from fearless.abi import TileParam
    from fearless.runtime import tile_gpu

    sig = (TileParam("x", "tensor", F32, 1), TileParam("s", "scalar", dtypes.bf16))
    gpu = tile_gpu.GpuLaunch("k", FUNCTION, (1, 1, 1), tile_gpu.ParamBlock(sig, [(8,)]))
    assert gpu._cplan is None


# --------------------------------------------------------------------- the Tile warm path in C


def _never(args: Any, target: Any) -> Any:
    raise AssertionError("the slow path is not taken here")


def _dropout_warm() -> tuple[Any, Any, Any]:
    """A Dispatcher for ops' dropout kernel (Part, Tensor, u32, f32, i64) and a prepared
    launch."""
    from fearless.abi import TileParam
    from fearless.ops.kernels_activation import make_dropout
    from fearless.runtime import dispatch, tile_gpu

    sig = (
        TileParam("out", "part", F32, 1, tile=(1024,)),
        TileParam("x", "tensor", F32, 1),
        TileParam("threshold", "scalar", dtypes.u32),
        TileParam("scale", "scalar", F32),
        TileParam("seed", "scalar", dtypes.i64),
    )
    gpu = tile_gpu.GpuLaunch("k", FUNCTION, (16, 1, 1), tile_gpu.ParamBlock(sig, [(16384,)] * 2))
    warm = dispatch.Dispatcher("k", make_dropout(fl.f32).declared(), _never, None)
    prepared = dispatch.Prepared(sig, None, (16, 1, 1), (65536, 65536), gpu)  # type: ignore[arg-type]
    return warm, gpu, prepared


def test_the_tile_warm_path_in_c_launches_what_python_would(
    tile_c: tuple[Calls, TileCu],  # noqa: F811
) -> None:
    from fearless.runtime.target import Target

    calls, cu = tile_c
    cu.sizes[:] = [8, 4, 8, 4, 4, 4, 8]  # out and its extent, x likewise, threshold, scale, seed
    warm, gpu, prepared = _dropout_warm()
    out, x = _dev(0x7F0000000000, (16384,)), _dev(0x7F0000100000, (16384,))
    part = out.partition((1024,))
    args = (part, x, 2**32 - 1, 0.25, -(2**62))
    entry, key, payload = warm.lookup(args, Target.CUDA)
    assert entry is None and warm.c is None
    warm.store(key, prepared)
    assert warm.c is not None and key in warm.c_entries
    assert warm.c_launch(warm.c, args, 0) == 0
    assert len(calls) == 1 and calls[0]["grid"] == (16, 1, 1)
    gpu._c_launch = None
    assert warm.lookup(args, Target.CUDA)[0] is prepared
    gpu(payload, None)  # the Python path on the same arguments
    assert cu.calls == [calls[0]["bytes"]]
    # another key, a given-back partition, an overlap, a moved input: C launches nothing
    other = _dev(0x7F0000000000, (8192,)).partition((1024,))
    overlapping = _dev(0x7F0000100000 + 4096, (16384,)).partition((1024,))
    refused = [
        (other, x, 7, 0.25, 1),
        (part, x, 7, 0.25, 1.0),  # a float for the i64: another key
        (part, x, 7, 0.25, 2**63),  # past i64: packs nowhere
        (part, x, 2**32, 0.25, 1),  # past u32
        (part, x, -1, 0.25, 1),  # below u32
        (overlapping, x, 7, 0.25, 1),
        (part, np.zeros(16384, np.float32), 7, 0.25, 1),
        (part, None, 7, 0.25, 1),  # None in a tensor slot: left to the Python warm path
    ]
    for bad in refused:
        assert warm.c_launch(warm.c, bad, 0) == -1, bad
    part.unpartition()
    assert warm.c_launch(warm.c, args, 0) == -1  # given back
    moved = out.partition((1024,))
    assert warm.c_launch(warm.c, (moved, out, 7, 0.25, 1), 0) == -1  # `out` is moved
    assert len(calls) == 1


@tile.kernel
def _scaled(z: tile.Part[fl.f32], m: tile.Tensor[fl.f32] | None, x: tile.Tensor[fl.f32], s: fl.f32):
    y = tile.load_like(x, z) * s
    if m is not None:
        y = y * tile.load_like(m, z)
    z.store(y)  # fmt: skip


def _warm_with_one_left_out(driver: tuple[Calls, TileCu], kernel: Any, slot: int) -> Any:
    """`kernel` (an output z, an optional array at `slot` 0 or 1, an input x, a scalar s) on
    the compiled warm path with that array left out: its key part is None and it has no
    payload, so C launches (twice: the second through the remembered last key) the bytes
    the Python path packs. Returns (dispatcher, z's Partition, x) for more calls."""
    from fearless.abi import TileParam
    from fearless.runtime import dispatch, tile_gpu
    from fearless.runtime.target import Target

    calls, cu = driver  # the tile_c fixture's
    cu.sizes[:] = [8, 4, 8, 4, 4]  # z and its extent, x likewise, s
    z = TileParam("z", "part", F32, 1, tile=(1024,))
    sig: list[Any] = [z, TileParam("x", "tensor", F32, 1), TileParam("s", "scalar", F32)]
    sig.insert(slot, TileParam(kernel.declared()[slot].name, "const", None, value=None))
    gpu = tile_gpu.GpuLaunch("k", FUNCTION, (16, 1, 1), tile_gpu.ParamBlock(sig, [(16384,)] * 2))
    warm = dispatch.Dispatcher("k", kernel.declared(), _never, None)
    extents = [65536, 65536]
    extents.insert(slot, 0)
    prepared = dispatch.Prepared(tuple(sig), None, (16, 1, 1), tuple(extents), gpu)  # type: ignore[arg-type]
    out, x = _dev(0x7F0000000000, (16384,)), _dev(0x7F0000100000, (16384,))
    part = out.partition((1024,))
    args: list[Any] = [part, x, 0.5]
    args.insert(slot, None)
    entry, key, payload = warm.lookup(tuple(args), Target.CUDA)
    assert entry is None and key is not None and key[slot + 1] is None
    warm.store(key, prepared)
    assert warm.c_launch(warm.c, tuple(args), 0) == 0
    assert warm.c_launch(warm.c, tuple(args), 0) == 0  # the remembered last key
    assert len(calls) == 2 and calls[0]["grid"] == (16, 1, 1)
    gpu._c_launch = None
    gpu(payload, None)  # the Python path on the same arguments
    assert cu.calls == [calls[0]["bytes"]]
    return warm, part, x


def test_the_tile_warm_path_in_c_launches_an_optional_array_left_out(
    tile_c: tuple[Calls, TileCu],  # noqa: F811
) -> None:
    """None for an optional array (`tile.Tensor[T] | None`): the overlap pairs skip it; a
    tensor there is another key, and an output overlapping the other input is still refused."""
    warm, part, x = _warm_with_one_left_out(tile_c, _scaled, 1)
    overlapping = _dev(0x7F0000000000 + 4096, (16384,))
    assert warm.c_launch(warm.c, (part, None, overlapping, 0.5), 0) == -1
    assert warm.c_launch(warm.c, (part, x, x, 0.5), 0) == -1  # m given: no entry for that key
    assert len(tile_c[0]) == 2
    part.unpartition()


@tile.kernel
def _with_stats(
    st: tile.Part[fl.f32] | None, z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], s: fl.f32
):
    y = tile.load_like(x, z) * s
    if st is not None:
        st.store(y)
    z.store(y)  # fmt: skip


def test_the_tile_warm_path_in_c_launches_an_optional_output_left_out(
    tile_c: tuple[Calls, TileCu],  # noqa: F811
) -> None:
    """None for an optional Part (`tile.Part[T] | None`), as for an optional Tensor; a
    Partition there is another key."""
    warm, part, x = _warm_with_one_left_out(tile_c, _with_stats, 0)
    stats = _dev(0x7F0000200000, (16384,)).partition((1024,))
    assert warm.c_launch(warm.c, (stats, part, x, 0.5), 0) == -1  # given: no entry for that key
    assert len(tile_c[0]) == 2
    stats.unpartition()
    part.unpartition()


def test_the_tile_warm_path_decides_the_default_stream_in_c(
    tile_c: tuple[Calls, TileCu],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`None` for the stream: torch's current one, or the Python path inside `fl.graph` or
    while torch captures (claunch_streams.c reads streams.py's globals)."""
    from fearless.runtime import streams
    from fearless.runtime.target import Target

    calls, cu = tile_c
    cu.sizes[:] = [8, 4, 8, 4, 4, 4, 8]
    warm, _, prepared = _dropout_warm()
    part = _dev(0x7F0000000000, (16384,)).partition((1024,))
    args = (part, _dev(0x7F0000100000, (16384,)), 7, 0.25, 1)
    warm.store(warm.lookup(args, Target.CUDA)[1], prepared)
    monkeypatch.setattr(streams, "_torch_current", None)
    assert warm.c_launch(warm.c, args, None) == 0 and calls[-1]["stream"] == 0
    monkeypatch.setattr(streams, "_torch_current", lambda device: 0x5000)
    monkeypatch.setattr(streams, "_torch_capturing", lambda: False)
    assert warm.c_launch(warm.c, args, None) == 0 and calls[-1]["stream"] == 0x5000
    monkeypatch.setattr(streams, "_torch_capturing", lambda: True)
    assert warm.c_launch(warm.c, args, None) == -1
    monkeypatch.setattr(streams, "_torch_capturing", lambda: False)
    monkeypatch.setattr(streams, "_captures", 1)
    assert warm.c_launch(warm.c, args, None) == -1 and len(calls) == 2


def test_the_tile_warm_path_in_c_remembers_its_last_key_until_the_entries_are_cleared(
    tile_c: tuple[Calls, TileCu],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call whose key is the last one found launches without the dict lookup; a key with
    no entry is looked up (and launches nothing), and clearing the entries forgets it."""
    from fearless.runtime import dispatch
    from fearless.runtime.target import Target

    calls, cu = tile_c
    cu.sizes[:] = [8, 4, 8, 4, 4, 4, 8]  # the dropout kernel's parameters, as above
    warm, _, prepared = _dropout_warm()
    out, x = _dev(0x7F0000000000, (16384,)), _dev(0x7F0000100000, (16384,))
    part = out.partition((1024,))
    args = (part, x, 7, 0.25, 1)
    warm.store(warm.lookup(args, Target.CUDA)[1], prepared)
    assert warm.c_launch(warm.c, args, 0) == 0  # found, and remembered
    same_key = _dev(0x7F0000200000, (16384,))  # another array, an equal shape, same alignment
    assert warm.c_launch(warm.c, (part, same_key, 9, 0.5, 2), 0) == 0
    misaligned = _dev(0x7F0000200004, (16384,))
    shorter = _dev(0x7F0000300000, (8192,))
    for bad in (misaligned, shorter):
        assert warm.c_launch(warm.c, (part, bad, 7, 0.25, 1), 0) == -1
    assert warm.c_launch(warm.c, args, 0) == 0
    assert len(calls) == 3
    other = _dev(0x7F0000400000, (8192,)).partition((1024,))
    monkeypatch.setattr(dispatch, "MAX_ENTRIES", 1)
    warm.store(warm.lookup((other, shorter, 7, 0.25, 1), Target.CUDA)[1], prepared)
    assert warm.c_launch(warm.c, args, 0) == -1  # its entry was cleared: nothing launches
    assert len(calls) == 3


def test_prefetch_builds_the_module_on_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Without the module built at install (or with one of other sources), a kernel's first
    launch starts the C build (`prefetch`) before it compiles the kernel: a fresh cache is
    filled by a worker thread, its objects compiled side by side and linked, and `module()`
    gives that build's module."""
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(claunch, "_installed", lambda: None)
    for name, value in (("_module", None), ("_why", None), ("_prefetching", None)):
        monkeypatch.setattr(claunch, name, value)
    claunch.prefetch()
    worker = claunch._prefetching
    assert worker is not None and worker.name == "fearless-claunch-build"
    worker.join(120)
    if claunch._why is not None:
        pytest.skip(f"no compiled launcher here: {claunch._why}")
    claunch.prefetch()  # built: no second thread
    assert claunch._prefetching is worker
    built = sorted(p.name for p in (tmp_path / "claunch").iterdir())
    assert len(built) == 1 and built[0].startswith("_fearless_claunch_"), built  # no .o left
    assert claunch.module() is not None and hasattr(claunch.module(), "launch")


def test_the_module_built_at_install_serves_when_built_from_these_sources(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """`pip install` (setup.py, which `make test` runs) compiles the module into the package,
    tagged with its sources' digest: the first launch loads it (no C compiler runs, nothing
    is built into the cache), unless its tag is not these sources' (an editable install whose C
    changed since), which the first-use build then replaces."""
    import shutil

    from fearless.runtime import claunch_units

    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the install built no module")
    installed = claunch._installed()
    assert installed is not None, "the editable install built no fearless.runtime._fearless_claunch"
    assert installed.__name__ == "fearless.runtime._fearless_claunch"
    assert claunch_units.tag() == installed.TAG and hasattr(installed, "tile_warm")
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path))
    for name, value in (("_module", None), ("_why", None), ("_prefetching", None)):
        monkeypatch.setattr(claunch, name, value)
    assert claunch.module() is installed and not (tmp_path / "claunch").exists()
    monkeypatch.setattr(claunch_units, "tag", lambda: "0123456789abcdef")
    assert claunch._installed() is None  # other sources: built at first use instead


def test_a_launch_on_the_capture_stream_keeps_its_arguments_alive(
    fake_gpu: FakeDriver,  # noqa: F811
    c_driver: Calls,  # noqa: F811
) -> None:
    """Inside `fl.graph`, a launch given the capture stream itself is captured as one without
    `stream=` is: the C path hands it to the Python one, which keeps its arguments for the
    graph (its replays need them alive); a launch on another stream runs now, kept by nobody,
    and stays in C."""
    from fearless.runtime import streams

    plan = _plan(fake_gpu, SAXPY)
    x, y, out = _dev(0x10000, (1000,)), _dev(0x20000, (1000,)), _dev(0x30000, (1000,))
    capture, other = streams.Stream(0x7000), streams.Stream(0x8000)
    plan.launch(4, 256, (2.5, x, y, out, -7), capture)
    assert len(c_driver) == 1 and not fake_gpu.calls  # outside a capture: C
    kept: list[Any] = []
    with streams.using_stream(capture, kept):
        plan.launch(4, 256, (2.5, x, y, out, -7), capture)
        plan.launch(4, 256, (1.5, x, y, out, -7), other)
    assert kept == [(2.5, x, y, out, -7)]
    assert len(c_driver) == 2 and len(fake_gpu.calls) == 1
    assert fake_gpu.calls[0]["stream"] == 0x7000 and c_driver[1]["stream"] == 0x8000
