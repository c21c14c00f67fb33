"""The warm path of Tile launches (tile/dispatch.py): same specialisation, grid and parameter
bytes as the slow path, and every check still refusing on a call after a successful one.

The "cuda" tests run on a fake driver: compiling stops at the tile IR (no tileiras), loading
returns a fake function, and cuLaunchKernel records the bytes its parameter pointers point at.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import tile
from fearless.abi import array_align
from fearless.runtime import dispatch, driver
from fearless.runtime.params import STRUCT_CODES, bf16_bits
from fearless.runtime.target import Target
from fearless.runtime.tensor import Tensor
from fearless.tile.grid import partition_grid
from fearless.tile.kernel import Kernel
from support import fake_tile_driver
from support.fake_tile_driver import FakeCU, _dev
from support.torch_on_gpu0 import report_cuda0

fake_gpu = fake_tile_driver.fake_gpu  # the fixture (tests/support/fake_tile_driver.py)


@tile.kernel
def add(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) + tile.load_like(y, z))


@tile.kernel
def axpb(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], a: fl.f32, n: fl.i8, k: tile.Const[int]):
    z.store(tile.load_like(x, z) * a + (n.astype(fl.f32) + k))


@tile.kernel
def scale16(z: tile.Part[fl.bf16], x: tile.Tensor[fl.bf16], a: fl.bf16):
    z.store(tile.load_like(x, z) * a)


@tile.kernel
def two(a: tile.Part[fl.f32], b: tile.Part[fl.f32]):
    a.store(0.0)
    b.store(1.0)


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    """Each test starts with no prepared launch (the kernels above are shared)."""
    for k in (add, axpb, scale16, two):
        k._dispatch = None
        k.compiles.gpu.clear()


def _slow_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the launches that went the slow way (through `signature_of`)."""
    calls: list[int] = []
    real = Kernel.signature_of

    def counted(self: Kernel, args: tuple[Any, ...], target: str) -> Any:
        calls.append(1)
        return real(self, args, target)

    monkeypatch.setattr(Kernel, "signature_of", counted)
    return calls


def _same_info(a: Any, b: Any) -> None:
    assert (a.ptr, a.nbytes, a.shape, a.dtype, a.on_device) == (
        b.ptr,
        b.nbytes,
        b.shape,
        b.dtype,
        b.on_device,
    )
    assert a.owner is b.owner and a.host is b.host


# ---------------------------------------------------------------------------------- simulator


def test_a_warm_launch_skips_the_slow_path_and_matches_it(monkeypatch: pytest.MonkeyPatch) -> None:
    slow = _slow_calls(monkeypatch)
    zp = fl.zeros((40, 100)).partition((16, 128))
    x = fl.asarray(np.arange(4000, dtype=np.float32).reshape(40, 100))
    y = fl.full((40, 100), 2.0)
    add(zp, x, y)
    add(zp, x, y)
    assert len(slow) == 1
    signature, values = add.signature_of((zp, x, y), Target.SIM)
    (entry,) = add._dispatch.entries.values()  # type: ignore[union-attr]
    assert entry.signature == signature and entry.grid == partition_grid("add", signature, values)
    assert entry.ir is add.ir_for(signature)
    got, _, payload = add._dispatch.lookup((zp, x, y), Target.SIM)  # type: ignore[union-attr]
    assert got is entry
    assert payload[0][0] is zp
    for fast, slow_value in zip(
        [payload[0][1], *payload[1:]], [values[0][1], *values[1:]], strict=True
    ):
        _same_info(fast, slow_value)
    np.testing.assert_array_equal(zp.unpartition().numpy(), x.numpy() + 2)


def test_numpy_and_cpu_torch_inputs_are_cached_too(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    slow = _slow_calls(monkeypatch)
    zp = fl.zeros(300).partition((128,))
    xn = np.arange(300, dtype=np.float32)
    yt = torch.ones(300)
    add(zp, xn, yt)
    add(zp, xn, yt)
    assert len(slow) == 1
    np.testing.assert_array_equal(zp.unpartition().numpy(), xn + 1)


def test_scalars_and_consts_are_keyed_by_type_and_value(monkeypatch: pytest.MonkeyPatch) -> None:
    slow = _slow_calls(monkeypatch)
    zp = fl.zeros(128).partition((128,))
    x = fl.full(128, 1.0)
    axpb(zp, x, 2.0, 3, 4)
    axpb(zp, x, 5.0, -7, 4)  # new scalar values: the same specialisation
    assert len(slow) == 1
    np.testing.assert_array_equal(zp.tensor._host, np.full(128, 5 - 7 + 4, np.float32))
    axpb(zp, x, 2, 3, 4)  # an int for an f32: another key, checked by the slow path once
    axpb(zp, x, 2.0, 3, 5)  # another Const value: another specialisation
    assert len(slow) == 3
    assert len(axpb._dispatch.entries) == 3  # type: ignore[union-attr]
    np.testing.assert_array_equal(zp.unpartition().numpy(), np.full(128, 10, np.float32))


def test_each_check_still_fires_after_a_successful_launch() -> None:
    host = np.zeros(256, np.float32)
    z = fl.asarray(host)
    zp = z.partition((128,))
    x = fl.zeros(256)
    add(zp, x, x)  # prepared: every later call below has a key of the same shape
    warm = add._dispatch
    assert warm is not None

    with pytest.raises(fl.KernelTypeError, match="takes 3 argument") as arity:
        add(zp, x)
    assert arity.value.diagnostic.code == "E0061"

    alias = fl.asarray(host)  # a second handle on z's storage, of the same key as x
    assert warm.lookup((zp, alias, x), Target.SIM)[1] in warm.entries
    with pytest.raises(fl.BorrowError, match="cannot borrow `z` as mutable"):
        add(zp, alias, x)

    with pytest.raises(
        fl.KernelTypeError, match=r"`[a-z]*` has element type f16, but `[a-z_0-9]*` expects f32"
    ):
        add(zp, fl.zeros(256, dtype=fl.f16), x)

    with pytest.raises(fl.KernelTypeError, match="needs a Partition"):
        add(x, x, x)

    gpu_side = Tensor._make(0x1000, (256,), fl.f32, on_device=True, owner=None)
    with pytest.raises(fl.KernelTypeError, match="is in GPU memory"):
        add(zp, gpu_side, x)
    with pytest.raises(fl.KernelTypeError, match="lives on the GPU but the target is sim"):
        add(gpu_side.partition((128,)), x, x)

    moved = fl.zeros(256)
    add(zp, moved, x)
    moved_p = moved.partition((128,))
    with pytest.raises(fl.MovedError, match="moved into a partition"):
        add(zp, moved, x)
    moved_p.unpartition()

    z = zp.unpartition()
    with pytest.raises(fl.MovedError, match=r"after `unpartition\(\)`"):
        add(zp, x, x)
    z.numpy()


def test_scalar_range_and_const_type_still_refused_after_a_launch() -> None:
    zp = fl.zeros(128).partition((128,))
    x = fl.zeros(128)
    axpb(zp, x, 1.0, 100, 1)
    with pytest.raises(
        fl.KernelTypeError, match=r"`n` = 1000 does not fit the parameter.s type i8"
    ):
        axpb(zp, x, 1.0, 1000, 1)
    with pytest.raises(
        fl.KernelTypeError, match=r"`n` = True does not fit the parameter.s type i8"
    ):
        axpb(zp, x, 1.0, True, 1)
    with pytest.raises(
        fl.KernelTypeError, match=r"`a` = .x. does not fit the parameter.s type f32"
    ):
        axpb(zp, x, "x", 1, 1)
    with pytest.raises(fl.KernelTypeError, match=r"`k` is a `tile.Const\[int\]`, got 1.0"):
        axpb(zp, x, 1.0, 1, 1.0)
    with pytest.raises(fl.KernelTypeError, match=r"`k` is a `tile.Const\[int\]`, got True"):
        axpb(zp, x, 1.0, 1, True)


def test_partitions_disagreeing_after_agreeing() -> None:
    a = fl.zeros(256).partition((128,))
    b = fl.zeros(256).partition((128,))
    two(a, b)
    c = fl.zeros(256).partition((64,))
    with pytest.raises(fl.LaunchContractError, match="disagree on the grid"):
        two(a, c)


def test_a_new_shape_or_pointer_alignment_is_a_new_specialisation() -> None:
    zp = fl.zeros(1000).partition((128,))
    aligned = fl.asarray(np.ones(1000, np.float32))
    add(zp, aligned, aligned)
    shifted = fl.asarray(np.ones(1001, np.float32)[1:])  # 4 bytes past a 16-byte boundary
    add(zp, shifted, aligned)
    warm = add._dispatch
    assert warm is not None
    sigs = [e.signature for e in warm.entries.values()]
    assert [s[1].align[0] for s in sigs[-2:]] == [16, 4]
    assert sigs[-1] == add.signature_of((zp, shifted, aligned), Target.SIM)[0]

    zp2 = fl.zeros(1024).partition((128,))
    x = fl.zeros(1024)
    add(zp2, x, x)
    add(zp2, x, x)
    entry, _, _ = warm.lookup((zp2, x, x), Target.SIM)
    assert entry is not None and entry.signature == add.signature_of((zp2, x, x), Target.SIM)[0]
    assert entry.signature[1].align == array_align(x.data_ptr, (1024,), 4)
    assert entry.grid == (8, 1, 1)
    np.testing.assert_array_equal(zp.unpartition().numpy(), np.full(1000, 2, np.float32))


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "MAX_ENTRIES", 2)

    @tile.kernel
    def copy(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        z.store(tile.load_like(x, z))

    for n in (128, 256, 384, 512):
        copy(fl.zeros(n).partition((128,)), fl.zeros(n))
    assert len(copy._dispatch.entries) <= 2  # type: ignore[union-attr]


# --------------------------------------------------------------------------- fake GPU driver


def _reference_params(kernel: Kernel, args: tuple[Any, ...]) -> list[bytes]:
    """The parameter bytes as the launcher before the warm path packed them, one value at a
    time from `signature_of`'s values."""
    signature, values = kernel.signature_of(args, Target.CUDA)
    out = []
    for p, v in zip(signature, values, strict=True):
        if p.kind == "const":
            continue
        if p.is_array:
            info = v[1] if p.kind == "part" else v
            shape = info.shape
            strides = [1] * len(shape)
            for i in range(len(shape) - 2, -1, -1):
                strides[i] = strides[i + 1] * shape[i + 1]
            out.append(struct.pack("<Q", info.ptr))
            out += [struct.pack("<i", d) for d in (*shape, *strides[:-1])]
        else:
            code = STRUCT_CODES[p.dtype.name]
            out.append(struct.pack("<" + code, bf16_bits(v) if p.dtype.name == "bf16" else v))
    return out


def _launch(fake: FakeCU, kernel: Kernel, *args: Any, **kw: Any) -> dict[str, Any]:
    expected = _reference_params(kernel, args)
    fake.sizes = [len(b) for b in expected]
    kernel(*args, **kw)
    call = fake.calls[-1]
    assert call["params"] == expected
    assert call["block"] == (1, 1, 1)
    return call


def test_gpu_warm_launch_packs_what_the_slow_path_packs(
    fake_gpu: FakeCU, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = _slow_calls(monkeypatch)
    zp = _dev(0x10000, (40, 100)).partition((16, 128))
    x, y = _dev(0x20000, (40, 100)), _dev(0x30004, (40, 100))
    first = _launch(fake_gpu, add, zp, x, y)
    calls_before = len(slow)
    x2 = _dev(0x50000, (40, 100))  # another pointer of the same key: the warm path
    fake_gpu.sizes = [len(b) for b in _reference_params(add, (zp, x2, y))]
    add(zp, x2, y)
    assert len(slow) == calls_before + 1  # only the reference above
    assert fake_gpu.calls[-1]["params"] == _reference_params(add, (zp, x2, y))
    assert first["grid"] == fake_gpu.calls[-1]["grid"] == (3, 1, 1)
    assert first["stream"] == 0 and first["function"] == "CUfunction:add"
    (entry,) = add._dispatch.entries.values()  # type: ignore[union-attr]
    assert entry.run.params.param_bytes() == fake_gpu.calls[-1]["params"]  # type: ignore[attr-defined]


def test_gpu_scalars_consts_and_bf16(fake_gpu: FakeCU) -> None:
    zp = _dev(0x10000, (300,)).partition((128,))
    x = _dev(0x20000, (300,))
    _launch(fake_gpu, axpb, zp, x, 2.5, -3, 7)
    _launch(fake_gpu, axpb, zp, x, -1.25, 127, 7)  # warm: only the scalars change
    assert len(axpb._dispatch.entries) == 1  # type: ignore[union-attr]
    with pytest.raises(fl.KernelTypeError, match=r"`n` = 128 does not fit the parameter.s type i8"):
        axpb(zp, x, 1.0, 128, 7)
    with pytest.raises(
        fl.KernelTypeError, match=r"= 1e\+300 does not fit the parameter.s type f32"
    ):
        axpb(zp, x, 1e300, 1, 7)  # warm key (a float): the reader declines, the binder explains
    zb = _dev(0x40000, (8, 8), fl.bf16).partition((8, 8))
    xb = _dev(0x50000, (8, 8), fl.bf16)
    _launch(fake_gpu, scale16, zb, xb, 1.5)
    call = _launch(fake_gpu, scale16, zb, xb, -0.1)
    assert call["params"][-1] == struct.pack("<H", bf16_bits(-0.1))


def test_gpu_streams(fake_gpu: FakeCU) -> None:
    zp = _dev(0x10000, (128,)).partition((128,))
    x = _dev(0x20000, (128,))
    assert _launch(fake_gpu, add, zp, x, x, stream=None)["stream"] == 0
    assert _launch(fake_gpu, add, zp, x, x, stream=0x7000)["stream"] == 0x7000
    assert _launch(fake_gpu, add, zp, x, x, stream=fl.Stream(0x8000))["stream"] == 0x8000
    with pytest.raises(fl.KernelTypeError, match="is not a CUDA stream"):
        add(zp, x, x, stream="default")


def test_gpu_checks_after_a_warm_launch(fake_gpu: FakeCU) -> None:
    zp = _dev(0x100000, (256,)).partition((128,))
    x = _dev(0x200000, (256,))
    _launch(fake_gpu, add, zp, x, x)
    _launch(fake_gpu, add, zp, x, x)
    launches = len(fake_gpu.calls)
    inside = _dev(0x100000 + 512, (256,))  # shares z's second half, same key as x
    with pytest.raises(fl.BorrowError, match="cannot borrow `z` as mutable"):
        add(zp, inside, x)
    host_side = Tensor._make(0x300000, (256,), fl.f32, on_device=False, owner=None)
    with pytest.raises(fl.KernelTypeError, match="host memory"):
        add(zp, host_side, x)
    with pytest.raises(fl.KernelTypeError, match="has element type i32, but `add` expects f32"):
        add(zp, _dev(0x200000, (256,), fl.i32), x)
    huge = _dev(0x1000_0000_0000, (2**31,))  # 8 GiB: an extent above 2**31 - 1
    with pytest.raises(fl.LaunchContractError, match=r"above 2\*\*31 - 1"):
        add(_dev(0x400000, (2**31,)).partition((1024,)), huge, huge)
    zp.unpartition()
    with pytest.raises(fl.MovedError):
        add(zp, x, x)
    assert len(fake_gpu.calls) == launches  # nothing launched


def test_gpu_cluster_check_and_driver_errors(
    fake_gpu: FakeCU, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_gpu.cluster = (2, 1, 1)
    k = add.options(num_ctas=2)
    x = _dev(0x200000, (1024,))
    _launch(fake_gpu, k, _dev(0x100000, (1024,)).partition((128,)), x, x)  # grid 8
    even = _dev(0x300000, (1024,)).partition((256,))  # grid 4: fine
    _launch(fake_gpu, k, even, x, x)
    odd = _dev(0x300000, (768,)).partition((256,))  # grid 3
    with pytest.raises(fl.LaunchContractError, match="do not divide its grid"):
        k(odd, _dev(0x400000, (768,)), _dev(0x400000, (768,)))

    made_current: list[bool] = []
    monkeypatch.setattr(driver, "make_current", lambda: made_current.append(True))
    zp = _dev(0x500000, (1024,)).partition((128,))
    fake_gpu.results = [fake_gpu.CUresult.CUDA_ERROR_INVALID_CONTEXT]
    _launch(fake_gpu, k, zp, x, x)
    assert made_current == [True]
    fake_gpu.results = [fake_gpu.CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES]
    with pytest.raises(fl.ToolchainError, match=r"launching `add` failed"):
        k(zp, x, x)


def test_gpu_torch_tensors_through_their_accessors(
    fake_gpu: FakeCU, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")

    class OnGpu0(torch.Tensor):
        """A CPU tensor that says it lives on cuda:0 (its pointer is only packed)."""

        @property
        def is_cuda(self) -> bool:
            return True

        @property
        def device(self) -> Any:
            return torch.device("cuda", 0)

        def get_device(self) -> int:
            return 0

    slow = _slow_calls(monkeypatch)
    zp = _dev(0x100000, (64, 64)).partition((32, 32))
    x = torch.zeros(64, 64).as_subclass(OnGpu0)
    y = torch.zeros(64, 64).as_subclass(OnGpu0)
    _launch(fake_gpu, add, zp, x, y)
    n = len(slow)
    fake_gpu.sizes = [len(b) for b in _reference_params(add, (zp, y, x))]
    add(zp, y, x)
    assert len(slow) == n + 1  # the reference only: the launch itself was warm
    strided = torch.zeros(64, 128).as_subclass(OnGpu0)[:, ::2]
    with pytest.raises(fl.KernelTypeError, match="not contiguous"):
        add(zp, strided, x)
    with pytest.raises(fl.KernelTypeError, match="has element type f64"):
        add(zp, torch.zeros(64, 64, dtype=torch.float64).as_subclass(OnGpu0), x)


@pytest.fixture
def plain_torch_on_gpu0(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Plain CPU torch tensors (not a subclass) report cuda:0 (support/torch_on_gpu0.py, as in
    test_launch_overhead_paths.py); `_not_cuda = True` on one makes it MPS-like."""
    torch = pytest.importorskip("torch")
    report_cuda0(monkeypatch)
    return torch


def test_gpu_plain_torch_tensors_are_read_inline(
    fake_gpu: FakeCU, plain_torch_on_gpu0: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = plain_torch_on_gpu0
    slow = _slow_calls(monkeypatch)
    zp = _dev(0x100000, (64, 64)).partition((32, 32))
    x, y = torch.zeros(64, 64), torch.ones(64, 64)
    _launch(fake_gpu, add, zp, x, y)
    key = add._dispatch.lookup((zp, x, y), Target.CUDA)[1]  # type: ignore[union-attr]
    assert key is not None and key[2] == (x.data_ptr() % 16, (64, 64))  # no strides in it
    n = len(slow)
    fake_gpu.sizes = [len(b) for b in _reference_params(add, (zp, y, x))]
    add(zp, y, x)
    assert len(slow) == n + 1  # the reference only: the launch itself was warm
    assert fake_gpu.calls[-1]["params"] == _reference_params(add, (zp, y, x))
    # contiguous with an odd stride on an extent-1 axis: torch's flag and `describe` agree
    odd = torch.zeros(64, 1, 64).transpose(0, 1).reshape(64, 64)
    _launch(fake_gpu, add, zp, odd, x)
    launches = len(fake_gpu.calls)
    with pytest.raises(fl.KernelTypeError, match="not contiguous"):
        add(zp, torch.zeros(64, 128)[:, ::2], x)
    with pytest.raises(fl.KernelTypeError, match="not contiguous"):
        add(zp, torch.zeros(64, 64).t(), x)  # same shape, same pointer kind: strides differ
    with pytest.raises(fl.KernelTypeError, match="has element type f64"):
        add(zp, torch.zeros(64, 64, dtype=torch.float64), x)
    mps = torch.zeros(64, 64)
    mps._not_cuda = True  # get_device() is 0, but it is not a CUDA tensor
    with pytest.raises(fl.KernelTypeError):
        add(zp, mps, x)
    assert len(fake_gpu.calls) == launches  # nothing launched


def test_gpu_borrow_check_with_many_torch_arrays(
    fake_gpu: FakeCU, plain_torch_on_gpu0: Any
) -> None:
    """Eight arrays, examples/tile_kernels.py's add7: every pair still checked when warm."""
    from support.tile_examples import ex

    torch = plain_torch_on_gpu0
    add7 = tile.kernel(ex.add7.func)  # a kernel of its own: no launches of other tests in it

    out = torch.zeros(1024)
    zp = _dev(out.data_ptr(), (1024,)).partition((1024,))
    ins = [torch.zeros(1024) for _ in range(7)]
    _launch(fake_gpu, add7, zp, *ins)
    _launch(fake_gpu, add7, zp, *ins[::-1])  # warm
    assert len(add7._dispatch.entries) == 1  # type: ignore[union-attr]
    launches = len(fake_gpu.calls)
    for i in range(7):
        args = list(ins)
        args[i] = out  # the output's own storage as an input: same key as a warm launch
        with pytest.raises(fl.BorrowError, match="cannot borrow `z` as mutable"):
            add7(zp, *args)
    assert len(fake_gpu.calls) == launches


def test_a_recording_trace_sees_each_gpu_launch_the_dispatcher_runs(fake_gpu: FakeCU) -> None:
    """ops/_replay.py's record: the dispatcher reports every GPU launch it runs, the slow
    path's first one and the warm path's (never the compiled one, which a recording skips),
    with the payload a replay moves its pointers in; a launch on a chosen stream refuses."""
    from fearless.runtime import trace

    zp = _dev(0x10000, (300,)).partition((128,))
    x = _dev(0x20000, (300,))
    fake_gpu.sizes = [len(b) for b in _reference_params(axpb, (zp, x, 2.5, -3, 7))]
    for _ in range(2):  # the slow path, then the warm one
        with trace.record() as rec:
            axpb(zp, x, 2.5, -3, 7)
        ((run, values),) = rec.launches
        assert rec.refused is None
        assert values == (0x10000, 0x20000, 2.5, -3)  # a Const has no parameter
        (entry,) = axpb._dispatch.entries.values()  # type: ignore[union-attr]
        assert run is entry.run
    with trace.record() as rec:
        axpb(zp, x, 2.5, -3, 7, stream=0x7000)
    assert rec.launches == [] and rec.refused is not None and "stream" in rec.refused
