"""Runtime pieces that need no GPU: targets, parameter packing, array descriptions, fl.Tensor on
the simulator, stream handles and the device error message."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import fearless as fl
from fearless import config, dtypes, tile
from fearless.abi import CompiledKernel, LaunchContract, ParamSpec, SiteInfo
from fearless.errors import Location
from fearless.runtime import arrays, target
from fearless.runtime import tensor as T
from fearless.runtime.binder import scalar_fits
from fearless.runtime.device_errors import format_index_error
from fearless.runtime.params import ParamPacker, bf16_bits
from fearless.runtime.streams import Stream, stream_handle
from fearless.runtime.target import Target


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch):
    """Run on the simulator whatever this machine has, and leave the target as it was."""
    monkeypatch.setattr(config, "_target_override", "sim")
    yield


# ------------------------------------------------------------------------------------ target


def test_target_falls_back_to_sim_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", None)
    monkeypatch.delenv("FEARLESS_TARGET", raising=False)
    monkeypatch.setattr(target, "_probe", (False, "no NVIDIA driver: libcuda.so not found", None))
    assert target.current_target() == "sim"
    assert target.get_target() == "sim"
    assert target.cuda_status() == (False, "no NVIDIA driver: libcuda.so not found")
    assert target.default_arch() == "sm_90"


def test_target_is_cuda_when_the_probe_finds_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", None)
    monkeypatch.delenv("FEARLESS_TARGET", raising=False)
    monkeypatch.delenv("FEARLESS_ARCH", raising=False)
    monkeypatch.setattr(target, "_probe", (True, "NVIDIA H200 (sm_90)", "sm_90"))
    assert target.current_target() == "cuda"
    monkeypatch.setenv("FEARLESS_ARCH", "sm_80")
    assert target.default_arch() == "sm_80"


def test_probe_on_this_machine_gives_a_reason() -> None:
    usable, reason = target.cuda_status()
    assert isinstance(usable, bool) and reason
    if not usable:
        assert target._probe is not None and target._probe[2] is None


def test_two_threads_probe_the_gpu_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm-up thread and the main thread asking at once share one probe (two concurrent
    imports of cuda.core once left one thread a half-imported module on the GPU)."""
    import threading
    import time

    calls: list[str] = []

    def slow_probe() -> tuple[bool, str, str | None]:
        calls.append(threading.current_thread().name)
        time.sleep(0.05)
        return (False, "no NVIDIA driver", None)

    with target._probe_lock:  # a warm-up thread's real probe (kernels defined at import) ends
        monkeypatch.setattr(target, "_probe", None)
        monkeypatch.setattr(target, "_probe_cuda", slow_probe)
    answers: list[tuple[bool, str]] = []
    threads = [
        threading.Thread(target=lambda: answers.append(target.cuda_status())) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and answers == [(False, "no NVIDIA driver")] * 4


def test_env_and_set_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_target_override", None)
    monkeypatch.setattr(target, "_probe", (False, "no NVIDIA driver", None))
    monkeypatch.setenv("FEARLESS_TARGET", "SIM")
    assert target.current_target() == "sim"
    monkeypatch.setenv("FEARLESS_TARGET", "tpu")
    with pytest.raises(target.TargetError, match="unknown target FEARLESS_TARGET='tpu'") as err:
        target.current_target()
    assert err.value.help and '"cuda"' in err.value.help
    monkeypatch.setenv("FEARLESS_TARGET", "cuda")
    with pytest.raises(fl.ToolchainError, match="cuda target is not usable: no NVIDIA driver"):
        target.current_target()
    monkeypatch.delenv("FEARLESS_TARGET")
    with pytest.raises(target.TargetError, match="unknown target 'gpu'"):
        target.set_target("gpu")
    with pytest.raises(fl.ToolchainError) as err2:
        target.set_target("cuda")
    assert "sim" in (err2.value.help or "")
    target.set_target("sim")
    assert config.target_override() == "sim"
    target.set_target(None)
    assert config.target_override() is None


# ------------------------------------------------------------------------------- the packer


def test_packer_lays_out_the_abi_with_natural_alignment() -> None:
    params = (
        ParamSpec("a", "slice", fl.f32),
        ParamSpec("c", "disjoint", fl.f32),
        ParamSpec("n", "scalar", fl.i32),
        ParamSpec("h", "scalar", fl.f16),
        ParamSpec("flag", "scalar", fl.bool_),
        ParamSpec("x", "scalar", fl.f64),
    )
    p = ParamPacker(params)
    # a.ptr a.len c.ptr c.len n h flag (pad) x, logical threads, then the error record pointer
    assert p.offsets == (0, 8, 16, 24, 32, 36, 38, 40, 48, 56)
    assert p.count == 10 and p.size == 64
    p.set(0x1000, 10, 0x2000, 10, -5, 1.5, True, 2.25, 1024)
    p.set_error_record(0xDEAD0)
    expected = struct.pack(
        "<QqQqie?xdqQ", 0x1000, 10, 0x2000, 10, -5, 1.5, True, 2.25, 1024, 0xDEAD0
    )
    assert p.to_bytes() == expected
    base = p.pointers()[0]
    assert p.pointers() == [base + off for off in p.offsets]
    # a second launch rewrites the values but keeps the error record pointer
    p.set(0x3000, 4, 0x4000, 4, 7, -0.5, False, 0.0, 1)
    assert p.to_bytes()[-8:] == struct.pack("<Q", 0xDEAD0)
    assert p.to_bytes()[:8] == struct.pack("<Q", 0x3000)
    assert p.address != 0


def test_packer_refuses_values_their_slot_cannot_hold() -> None:
    p = ParamPacker((ParamSpec("n", "scalar", fl.u8), ParamSpec("m", "scalar", fl.i32)))
    with pytest.raises(struct.error):
        p.set(256, 0, 1)
    with pytest.raises(struct.error):
        p.set(1, 1.5, 1)
    assert not scalar_fits(256, fl.u8) and scalar_fits(255, fl.u8)
    assert not scalar_fits(-1, fl.u32) and scalar_fits(-(2**31), fl.i32)
    assert not scalar_fits(1.5, fl.i64) and scalar_fits(3, fl.f32)
    assert not scalar_fits(1, fl.bool_) and scalar_fits(True, fl.bool_)


def test_bf16_bits_round_to_nearest_even() -> None:
    assert bf16_bits(1.0) == 0x3F80
    assert bf16_bits(-2.0) == 0xC000
    assert bf16_bits(1.00390625) == 0x3F80  # exactly half way, even neighbour below
    assert bf16_bits(1.01171875) == 0x3F82  # half way, odd neighbour below: rounds up
    assert bf16_bits(float("inf")) == 0x7F80
    assert bf16_bits(3.4e38) == 0x7F80  # rounds past the largest bf16 to infinity
    nan = bf16_bits(float("nan"))
    assert nan & 0x7F80 == 0x7F80 and nan & 0x7F


# ------------------------------------------------------------------------------ describing


@pytest.mark.parametrize("dtype", dtypes.ALL, ids=lambda d: d.name)
def test_numpy_dtypes_map_to_fearless_types(dtype: dtypes.DType) -> None:
    if dtype is fl.tf32:  # a tile type only: float32 arrays are f32
        assert dtypes.from_numpy(np.float32) is fl.f32
        return
    if dtype.is_raw:  # NumPy lacks it: ml_dtypes' type, stored as its raw bits
        import ml_dtypes

        a = np.zeros(3, dtype=getattr(ml_dtypes, dtypes.RAW_FLOATS[dtype.name]))
        info = arrays.describe(a, Target.SIM)
        assert info.dtype is dtype and info.host.dtype == dtype.np
        return
    a = np.zeros(3, dtype=dtype.np)
    assert arrays.describe(a, Target.SIM).dtype is dtype


def test_describe_numpy_on_sim() -> None:
    a = np.arange(1000, dtype=np.float32)
    info = arrays.describe(a, Target.SIM, name="a")
    assert info.ptr == a.ctypes.data and info.nbytes == 4000
    assert info.shape == (1000,) and info.strides == (4,) and info.dtype is fl.f32
    assert not info.on_device and info.host is a and info.owner is a and info.size == 1000
    view = arrays.describe(a[10:20], Target.SIM)
    assert view.ptr == a.ctypes.data + 40 and view.nbytes == 40
    assert arrays.describe(np.zeros(0, np.int8), Target.SIM).nbytes == 0
    two_d = arrays.describe(np.zeros((4, 8), np.float64), Target.SIM, ndim=None)
    assert two_d.strides == (64, 8) and two_d.contiguous


def test_describe_refuses_what_kernels_cannot_take() -> None:
    a = np.arange(16, dtype=np.float32)
    with pytest.raises(fl.KernelTypeError, match=r"`x` is not contiguous .*strides \(8,\)") as e:
        arrays.describe(a[::2], Target.SIM, name="x")
    assert "ascontiguousarray" in (e.value.help or "")
    assert e.value.loc is not None and e.value.loc.file == __file__
    with pytest.raises(fl.KernelTypeError, match="`x` has 2 dimensions, but kernels take 1-D"):
        arrays.describe(a.reshape(4, 4), Target.SIM, name="x")
    with pytest.raises(fl.KernelTypeError, match="in host memory, but the cuda target") as e2:
        arrays.describe(a, Target.CUDA, name="x")
    assert "fl.asarray" in (e2.value.help or "")
    with pytest.raises(fl.KernelTypeError, match="element type complex64"):
        arrays.describe(np.zeros(2, np.complex64), Target.SIM, name="z")
    with pytest.raises(fl.KernelTypeError, match="of type `list` is not an array"):
        arrays.describe([1, 2], Target.SIM, name="l")


def test_as_dtype_accepts_the_usual_spellings() -> None:
    assert arrays.as_dtype(fl.f16) is fl.f16
    assert arrays.as_dtype(np.float32) is fl.f32
    assert arrays.as_dtype(np.dtype("uint8")) is fl.u8
    assert arrays.as_dtype("i16") is fl.i16 and arrays.as_dtype("float64") is fl.f64
    assert arrays.as_dtype(int) is fl.i64 and arrays.as_dtype(float) is fl.f64
    assert arrays.as_dtype(bool) is fl.bool_
    with pytest.raises(fl.KernelTypeError, match="is not a fearless dtype"):
        arrays.as_dtype("complex128")
    torch = pytest.importorskip("torch")
    assert arrays.as_dtype(torch.float16) is fl.f16 and arrays.as_dtype(torch.bfloat16) is fl.bf16
    with pytest.raises(fl.KernelTypeError, match=r"torch\.complex64 is not a fearless dtype"):
        arrays.as_dtype(torch.complex64)


def test_choice_arguments_take_numpy_scalars_and_refuse_arrays_and_bools() -> None:
    """`is_one_of` (dim, reduction, chunk_size...): a NumPy scalar or a 0-d array is its value,
    as torch takes `dim=np.int64(-1)`; an array of an axis or more and a bool are no choice."""
    from fearless.ops._arguments import is_one_of

    assert is_one_of(np.int64(-1), (-1, 1)) and is_one_of(np.str_("sum"), ("mean", "sum"))
    assert is_one_of(np.array(64), (16, 64))
    assert not is_one_of(np.array([-1]), (-1, 1)) and not is_one_of(True, (1, 0))


# --------------------------------------------------------------------------- Tensor on sim


def test_tensor_constructors_on_sim(sim: None) -> None:
    e = T.empty(10, fl.i32)
    assert e.shape == (10,) and e.dtype is fl.i32 and e.size == 10 and len(e) == 10
    assert e.nbytes == 40 and e.ndim == 1 and e.target == "sim"
    z = T.zeros((2, 3), dtype=np.float64)
    assert z.shape == (2, 3) and z.dtype is fl.f64 and not z.numpy().any()
    f = T.full(5, 2.5)
    assert f.dtype is fl.f32 and (f.numpy() == 2.5).all()
    assert T.full(3, 7).dtype is fl.i64 and T.full(3, True).dtype is fl.bool_
    assert (T.full(4, -1.0, dtype=fl.bf16).numpy().view(np.uint16) == 0xBF80).all()
    r = T.arange(5)
    assert r.dtype is fl.i64 and r.numpy().tolist() == [0, 1, 2, 3, 4]
    rf = T.arange(0.0, 1.0, 0.25)
    assert rf.dtype is fl.f32 and rf.numpy().tolist() == [0.0, 0.25, 0.5, 0.75]
    assert T.arange(2, 8, 3, dtype=fl.u8).numpy().tolist() == [2, 5]
    assert T.empty(0).size == 0
    with pytest.raises(fl.KernelTypeError, match=r"cannot fill a tensor of i32 with 1\.5"):
        T.full(3, 1.5, dtype=fl.i32)
    with pytest.raises(fl.KernelTypeError, match="cannot fill a tensor of u8 with 300"):
        T.full(3, 300, dtype=fl.u8)
    with pytest.raises(fl.KernelTypeError, match="shape"):
        T.empty((2, -1))
    with pytest.raises(fl.KernelTypeError, match="not constructed directly"):
        T.Tensor()


def test_asarray_on_sim_shares_numpy_memory(sim: None) -> None:
    a = np.arange(8, dtype=np.float32)
    w1, w2 = T.asarray(a), T.from_numpy(a)
    assert w1.data_ptr == w2.data_ptr == a.ctypes.data
    assert w1.numpy() is a
    w1.numpy()[3] = 42.0
    assert a[3] == 42.0 and w2.numpy()[3] == 42.0
    assert arrays.describe(w1, Target.SIM).ptr == arrays.describe(a, Target.SIM).ptr
    assert T.asarray(w1) is w1
    converted = T.asarray(a, dtype=fl.f64)  # another dtype: a converted copy
    assert converted.dtype is fl.f64 and converted.data_ptr != a.ctypes.data
    strided = T.asarray(a[::2])  # kernels need contiguous memory: a copy
    assert strided.numpy().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert T.asarray([1, 2, 3]).dtype is fl.i64
    assert T.asarray([0.5, 1.5]).dtype is fl.f32
    bf = T.asarray([1.0, -2.0], dtype=fl.bf16)
    assert bf.numpy().tolist() == [1.0, -2.0]  # ml_dtypes' bfloat16
    assert bf.numpy().view(np.uint16).tolist() == [0x3F80, 0xC000]
    assert T.asarray(bf, dtype=fl.f32).numpy().tolist() == [1.0, -2.0]
    with pytest.raises(fl.KernelTypeError, match="from_numpy takes a NumPy array"):
        T.from_numpy([1, 2])  # type: ignore[arg-type]


def test_tensor_interchange_on_sim(sim: None) -> None:
    t = T.arange(4, dtype=fl.f32)
    assert not hasattr(t, "__cuda_array_interface__")
    assert t.__dlpack_device__() == (1, 0)
    back = np.from_dlpack(t)
    assert back.tolist() == [0.0, 1.0, 2.0, 3.0] and back.ctypes.data == t.data_ptr
    assert np.asarray(t) is t.numpy()
    assert repr(t) == "fl.Tensor([0., 1., 2., 3.], dtype=fl.f32, target='sim')"
    with pytest.raises(TypeError, match="0-d"):
        len(T.empty(()))


def test_moved_tensor_cannot_be_used(sim: None) -> None:
    t = T.zeros(4)
    t._mark_moved(Location("prog.py", 3, 4))
    with pytest.raises(fl.MovedError, match="moved into a partition") as err:
        t.numpy()
    assert "prog.py:3:5" in err.value.diagnostic.notes[0]
    with pytest.raises(fl.MovedError):
        arrays.describe(t, Target.SIM)
    t._unmove()
    assert t.numpy().tolist() == [0.0] * 4


# ----------------------------------------------------------------------------------- streams


class _TorchLikeStream:
    cuda_stream = 0x5000


class _ProtocolStream:
    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, 0x6000)


def test_stream_handles_of_every_kind(sim: None) -> None:
    assert stream_handle(None) == 0
    assert stream_handle(0x1234) == 0x1234
    assert stream_handle(_TorchLikeStream()) == 0x5000
    assert stream_handle(_ProtocolStream()) == 0x6000
    s = Stream()  # on sim: the default stream, nothing to order
    assert s.handle == 0 and stream_handle(s) == 0
    s.synchronize()
    wrapped = Stream(_ProtocolStream())
    assert wrapped.handle == 0x6000 and wrapped.__cuda_stream__() == (0, 0x6000)
    with pytest.raises(fl.KernelTypeError, match="`str` is not a CUDA stream"):
        stream_handle("default")
    with pytest.raises(fl.KernelTypeError, match="not a CUDA stream"):
        stream_handle(-3)


# -------------------------------------------------------------------------- device errors


def _kernel_with_sites() -> CompiledKernel:
    return CompiledKernel(
        name="gather",
        entry="fearless_gather",
        params=(ParamSpec("a", "slice", fl.f32), ParamSpec("c", "disjoint", fl.f32)),
        sites=(
            SiteInfo("read", "a", Location("kern.py", 7, 15, 7, 23)),
            SiteInfo("write", "c", Location("kern.py", 8, 8, 8, 12)),
        ),
        contract=LaunchContract(),
        arch="sm_90",
    )


def test_index_error_message_names_line_thread_and_index() -> None:
    ck = _kernel_with_sites()
    err = format_index_error(ck, [1, 0, 4, 0, 0, 0, 0, 0, 1024, 1000])
    assert isinstance(err, fl.KernelIndexError) and isinstance(err, IndexError)
    assert err.message == "index out of bounds: the len is 1000 but the index is 1024"
    assert err.loc == Location("kern.py", 7, 15, 7, 23)
    assert err.diagnostic.label == "read out of bounds"
    assert err.diagnostic.notes == [
        "reading `a` in kernel `gather`, block (4, 0, 0), thread (0, 0, 0)"
    ]
    write = format_index_error(ck, [1, 1, 0, 1, 2, 31, 1, 0, -1, 5])
    assert write.diagnostic.label == "write out of bounds"
    assert "the index is -1" in write.message and "thread (31, 1, 0)" in write.diagnostic.notes[0]
    unknown = format_index_error(ck, [1, 9, 0, 0, 0, 0, 0, 0, 3, 2])
    assert unknown.loc is None and "fearless bug" in (unknown.help or "")


class _DLPackOnly:
    """A foreign host array that speaks only DLPack (as JAX or a CPU tensor library would)."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __dlpack__(self, **kwargs: object) -> object:
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._a.__dlpack_device__()


def test_generic_dlpack_host_arrays_are_shared_on_sim(sim: None) -> None:
    a = np.arange(6, dtype=np.int16)
    info = arrays.describe(_DLPackOnly(a), Target.SIM, name="x")
    assert info.ptr == a.ctypes.data and info.dtype is fl.i16 and info.host is not None
    t = T.asarray(_DLPackOnly(a))
    assert t.data_ptr == a.ctypes.data and t.target == "sim"


def test_cpu_torch_tensors_on_sim(sim: None) -> None:
    torch = pytest.importorskip("torch")
    t = torch.arange(10, dtype=torch.float32)
    info = arrays.describe(t, Target.SIM, name="t")
    assert info.ptr == t.data_ptr() and info.dtype is fl.f32 and info.host is not None
    info.host[0] = 5.0
    assert t[0].item() == 5.0  # the host view is the tensor's memory
    assert arrays.describe(t[2:6], Target.SIM).ptr == t.data_ptr() + 8
    bf = arrays.describe(torch.ones(4, dtype=torch.bfloat16), Target.SIM)
    assert bf.dtype is fl.bf16 and bf.host is not None and bf.host.tolist() == [0x3F80] * 4
    with pytest.raises(fl.KernelTypeError, match="not contiguous"):
        arrays.describe(t[::2], Target.SIM, name="t")
    with pytest.raises(fl.KernelTypeError, match="complex64"):
        arrays.describe(torch.zeros(2, dtype=torch.complex64), Target.SIM, name="z")
    shared = T.asarray(t)
    assert shared.data_ptr == t.data_ptr()


@tile.kernel
def _twice_bf16(out: tile.Part[fl.bf16], x: tile.Tensor[fl.bf16]):
    out.store(tile.load_like(x, out) * 2.0)


def test_bf16_reaches_numpy_as_ml_dtypes_bfloat16(monkeypatch: pytest.MonkeyPatch) -> None:
    import ml_dtypes

    monkeypatch.setattr(config, "_target_override", "sim")
    a = np.array([1.5, -2.25, 3.0e38, 0.0], dtype=ml_dtypes.bfloat16)
    t = fl.asarray(a)  # shared on the simulator, as any NumPy array
    assert t.dtype is fl.bf16
    got = t.numpy()
    assert got.dtype == ml_dtypes.bfloat16 and got.tolist() == a.tolist()
    assert np.shares_memory(got, a)
    assert t.astype(fl.f32).numpy().tolist() == [1.5, -2.25, float(a[2]), 0.0]
    assert t.astype(fl.bf16).numpy().tolist() == a.tolist()

    out = np.zeros(4, dtype=ml_dtypes.bfloat16)
    part = fl.asarray(out).partition((4,))
    _twice_bf16(part, a)  # a NumPy bfloat16 array as a kernel argument
    assert part.unpartition().numpy().tolist() == [3.0, -4.5, float("inf"), 0.0]
