"""The runtime on a real GPU: kernel loading, launch plans, tensors, streams, device errors.

The kernels are hand-written PTX that follows the kernel ABI (abi.py): per array a u64 pointer
and an i64 length, scalars by value, last a u64 pointer to the kernel's error record
[flag, site, block xyz, thread xyz, index, length]. A failing bounds check wins a
compare-and-swap on the flag, fills the record and returns (no trap). No compiler is involved,
so these tests exercise the runtime alone. bench/launch_overhead_runtime.py reuses the PTX.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest

import fearless as fl
from fearless.abi import CompiledKernel, LaunchContract, ParamSpec, SiteInfo
from fearless.errors import Location
from fearless.runtime import driver, tensor
from fearless.runtime.device_errors import default_pool, synchronize
from fearless.runtime.launch import GpuLaunchPlan
from fearless.runtime.streams import Stream
from fearless.runtime.target import cuda_status, set_target

pytestmark = pytest.mark.gpu

# vecadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]):
#     i = thread.index_1d()
#     if i < len(c):
#         c[i] = a[i] + b[i]       # site 0: a[i] checked, site 1: b[i] checked
VECADD_PTX = r"""
.version 8.0
.target sm_80
.address_size 64

.visible .entry fearless_vecadd(
    .param .u64 a_ptr, .param .u64 a_len,
    .param .u64 b_ptr, .param .u64 b_len,
    .param .u64 c_ptr, .param .u64 c_len,
    .param .u64 logical_threads,
    .param .u64 err_ptr)
{
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<24>;
    .reg .f32 %f<4>;

    ld.param.u64 %rd1, [a_ptr];
    ld.param.u64 %rd2, [a_len];
    ld.param.u64 %rd3, [b_ptr];
    ld.param.u64 %rd4, [b_len];
    ld.param.u64 %rd5, [c_ptr];
    ld.param.u64 %rd6, [c_len];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd3, %rd3;
    cvta.to.global.u64 %rd5, %rd5;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd7, %r1, %r2;
    cvt.u64.u32 %rd8, %r3;
    add.s64 %rd7, %rd7, %rd8;
    setp.ge.s64 %p1, %rd7, %rd6;
    @%p1 bra DONE;
    mov.u64 %rd15, 0;
    mov.u64 %rd16, %rd2;
    setp.ge.s64 %p2, %rd7, %rd2;
    @%p2 bra REPORT;
    mov.u64 %rd15, 1;
    mov.u64 %rd16, %rd4;
    setp.ge.s64 %p3, %rd7, %rd4;
    @%p3 bra REPORT;
    shl.b64 %rd9, %rd7, 2;
    add.s64 %rd10, %rd1, %rd9;
    ld.global.f32 %f1, [%rd10];
    add.s64 %rd11, %rd3, %rd9;
    ld.global.f32 %f2, [%rd11];
    add.f32 %f3, %f1, %f2;
    add.s64 %rd12, %rd5, %rd9;
    st.global.f32 [%rd12], %f3;
DONE:
    ret;
REPORT:
    ld.param.u64 %rd13, [err_ptr];
    cvta.to.global.u64 %rd13, %rd13;
    atom.global.cas.b64 %rd14, [%rd13], 0, 1;
    setp.ne.s64 %p1, %rd14, 0;
    @%p1 bra DONE;
    st.global.u64 [%rd13+8], %rd15;
    cvt.u64.u32 %rd17, %r1;
    st.global.u64 [%rd13+16], %rd17;
    mov.u32 %r4, %ctaid.y;
    cvt.u64.u32 %rd17, %r4;
    st.global.u64 [%rd13+24], %rd17;
    mov.u32 %r4, %ctaid.z;
    cvt.u64.u32 %rd17, %r4;
    st.global.u64 [%rd13+32], %rd17;
    st.global.u64 [%rd13+40], %rd8;
    mov.u32 %r4, %tid.y;
    cvt.u64.u32 %rd17, %r4;
    st.global.u64 [%rd13+48], %rd17;
    mov.u32 %r4, %tid.z;
    cvt.u64.u32 %rd17, %r4;
    st.global.u64 [%rd13+56], %rd17;
    st.global.u64 [%rd13+64], %rd7;
    st.global.u64 [%rd13+72], %rd16;
    ret;
}
"""

# scale(c: DisjointSlice[f32], s: f32, n: i32):   c[i] = c[i] * s  for i < min(len(c), n)
# (a scalar f32 and an i32 after an array: checks the packer's offsets on the device)
SCALE_PTX = r"""
.version 8.0
.target sm_80
.address_size 64

.visible .entry fearless_scale(
    .param .u64 c_ptr, .param .u64 c_len,
    .param .f32 s,
    .param .u32 n,
    .param .u64 logical_threads,
    .param .u64 err_ptr)
{
    .reg .pred %p<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<12>;
    .reg .f32 %f<4>;

    ld.param.u64 %rd1, [c_ptr];
    ld.param.u64 %rd2, [c_len];
    ld.param.f32 %f1, [s];
    ld.param.u32 %r5, [n];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd3, %r1, %r2;
    cvt.u64.u32 %rd4, %r3;
    add.s64 %rd3, %rd3, %rd4;
    setp.ge.s64 %p1, %rd3, %rd2;
    @%p1 bra DONE;
    cvt.s64.s32 %rd5, %r5;
    setp.ge.s64 %p2, %rd3, %rd5;
    @%p2 bra DONE;
    shl.b64 %rd6, %rd3, 2;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.f32 %f2, [%rd7];
    mul.f32 %f3, %f2, %f1;
    st.global.f32 [%rd7], %f3;
DONE:
    ret;
}
"""

F32 = fl.f32
SITE_A = Location(__file__, 24, 15, 24, 19)  # stand-ins for the kernel source's `a[i]`, `b[i]`
SITE_B = Location(__file__, 24, 22, 24, 26)


def vecadd_kernel(**changes: object) -> CompiledKernel:
    ck = CompiledKernel(
        name="vecadd",
        entry="fearless_vecadd",
        params=(
            ParamSpec("a", "slice", F32),
            ParamSpec("b", "slice", F32),
            ParamSpec("c", "disjoint", F32),
        ),
        sites=(SiteInfo("read", "a", SITE_A), SiteInfo("read", "b", SITE_B)),
        contract=LaunchContract(),
        arch=driver.ensure_initialized().arch,
        ptx=VECADD_PTX,
    )
    for key, value in changes.items():
        setattr(ck, key, value)
    return ck


def scale_kernel() -> CompiledKernel:
    return CompiledKernel(
        name="scale",
        entry="fearless_scale",
        params=(
            ParamSpec("c", "disjoint", F32),
            ParamSpec("s", "scalar", F32),
            ParamSpec("n", "scalar", fl.i32),
        ),
        sites=(),
        contract=LaunchContract(),
        arch=driver.ensure_initialized().arch,
        ptx=SCALE_PTX,
    )


@pytest.fixture(autouse=True)
def _cuda() -> Iterator[None]:
    ok, why = cuda_status()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    set_target("cuda")
    with contextlib.suppress(fl.KernelIndexError):  # left over from another test file
        synchronize()
    yield
    set_target(None)


@pytest.fixture(scope="module")
def vecadd() -> GpuLaunchPlan:
    if not cuda_status()[0]:
        pytest.skip("no usable GPU")
    return GpuLaunchPlan(vecadd_kernel())


def _grid(n: int, block: int = 256) -> int:
    return (n + block - 1) // block


# ---------------------------------------------------------------------------------- driver


def test_device_info() -> None:
    info = driver.ensure_initialized()
    major, minor = info.compute_capability
    assert info.arch == f"sm_{major}{minor}" and major >= 7
    assert info.max_threads_per_block >= 1024 and info.max_block_dims[0] >= 1024
    assert info.max_grid_dims[0] >= 2**31 - 1 and info.sm_count > 0 and info.warp_size == 32
    assert driver.is_initialized()


def test_load_kernel_from_ptx_and_from_cubin() -> None:
    k = driver.load_kernel(vecadd_kernel())
    assert k.binary == "ptx" and k.handle != 0 and k.num_regs > 0
    assert 256 <= k.max_threads_per_block <= driver.device_info().max_threads_per_block
    cubin = driver.ptx_to_cubin(VECADD_PTX, driver.device_info().arch)
    assert cubin is not None and cubin[:4] == b"\x7fELF"
    kc = driver.load_kernel(vecadd_kernel(cubin=cubin))
    assert kc.binary == "cubin" and kc.handle != 0


def test_bad_binaries_are_toolchain_errors() -> None:
    with pytest.raises(fl.ToolchainError, match="could not JIT-compile the PTX of `vecadd`") as err:
        driver.load_kernel(vecadd_kernel(ptx=VECADD_PTX.replace("add.f32", "add.f33")))
    assert err.value.diagnostic.notes and "ptxas said" in err.value.diagnostic.notes[0]
    with pytest.raises(fl.ToolchainError, match="finding the entry `fearless_nope`"):
        driver.load_kernel(vecadd_kernel(entry="fearless_nope"))
    # a broken cubin falls back to the PTX; without PTX its own error is raised
    assert driver.load_kernel(vecadd_kernel(cubin=b"not a cubin")).binary == "ptx"
    with pytest.raises(fl.ToolchainError, match="loading the cubin of `vecadd`"):
        driver.load_kernel(vecadd_kernel(cubin=b"not a cubin", ptx=""))


# ----------------------------------------------------------------------------------- launch


def test_vecadd_on_torch_tensors(vecadd: GpuLaunchPlan) -> None:
    torch = pytest.importorskip("torch")
    n = 100_003
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty(n, device="cuda")
    vecadd.launch(_grid(n), 256, (a, b, c))
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)
    synchronize()  # no device error was recorded


def test_vecadd_on_fl_tensors_from_numpy(vecadd: GpuLaunchPlan) -> None:
    rng = np.random.default_rng(1)
    n = 4099
    ah, bh = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    a, b, c = tensor.asarray(ah), tensor.from_numpy(bh), tensor.empty(n, F32)
    assert a.target == "cuda" and a.data_ptr != ah.ctypes.data
    vecadd.launch(_grid(n), 256, (a, b, c))
    np.testing.assert_array_equal(c.numpy(), ah + bh)


def test_scalars_reach_the_kernel() -> None:
    plan = GpuLaunchPlan(scale_kernel())
    c = tensor.full(1000, 2.0, dtype=F32)
    plan.launch(_grid(1000), 256, (c, 1.5, 600))
    out = c.numpy()
    assert (out[:600] == 3.0).all() and (out[600:] == 2.0).all()


def test_thousand_launches(vecadd: GpuLaunchPlan) -> None:
    n = 1 << 16
    a, b = tensor.asarray(np.arange(n, dtype=np.float32)), tensor.full(n, 1.0, dtype=F32)
    c = tensor.zeros(n, F32)
    before = default_pool().launches
    for _ in range(1000):
        vecadd.launch(_grid(n), 256, (a, b, c))
    synchronize()
    assert default_pool().launches - before == 1000
    np.testing.assert_array_equal(c.numpy(), np.arange(n, dtype=np.float32) + 1)


def test_launch_from_another_thread(vecadd: GpuLaunchPlan) -> None:
    import threading

    n = 512
    a, b, c = tensor.full(n, 1.0, dtype=F32), tensor.full(n, 2.0, dtype=F32), tensor.zeros(n, F32)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            vecadd.launch(_grid(n), 256, (a, b, c))  # this thread has no current context yet
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not errors
    assert (c.numpy() == 3.0).all()


def test_launch_contract_uses_the_device_limits(vecadd: GpuLaunchPlan) -> None:
    a = tensor.zeros(64, F32)
    b, c = tensor.zeros(64, F32), tensor.zeros(64, F32)
    with pytest.raises(fl.LaunchContractError, match="a block of 2048 threads is too large"):
        vecadd.launch(1, (32, 64), (a, b, c))
    with pytest.raises(fl.LaunchContractError, match="the block has 2048 along x"):
        vecadd.launch(1, 2048, (a, b, c))
    with pytest.raises(fl.LaunchContractError, match="above the device's limit"):
        vecadd.launch((1, 1 << 20), 32, (a, b, c))
    with pytest.raises(fl.KernelTypeError, match="`b` has element type f64"):
        vecadd.launch(1, 64, (a, np.zeros(64, np.float64), c))  # NumPy: checked, then copied


def test_numpy_arguments_are_copied_to_the_gpu_and_outputs_back(vecadd: GpuLaunchPlan) -> None:
    a = np.arange(1000, dtype=np.float32)
    b = np.full(1000, 0.25, np.float32)
    c = np.zeros(1000, np.float32)
    with pytest.warns(fl.HostCopyWarning, match="12,000 bytes"):
        vecadd.launch(4, 256, (a, b, c))
    np.testing.assert_array_equal(c, a + b)
    d = tensor.zeros(1000, F32)
    vecadd.launch(4, 256, (tensor.asarray(a), b, d))  # mixed: only `b` is copied
    np.testing.assert_array_equal(d.numpy(), a + b)


def test_borrow_check_sees_torch_views_and_wrappers(vecadd: GpuLaunchPlan) -> None:
    torch = pytest.importorskip("torch")
    buf = torch.zeros(2048, device="cuda")
    b = torch.ones(1024, device="cuda")
    with pytest.raises(fl.BorrowError, match="cannot borrow `c` as mutable") as err:
        vecadd.launch(4, 256, (buf[:1024], b, buf[512:1536]))
    assert err.value.diagnostic.notes == ["`a` overlaps bytes [0, 2048) of `c`"]
    vecadd.launch(4, 256, (buf[:1024], b, buf[1024:]))  # disjoint halves of one buffer
    wrapped = tensor.asarray(b)  # no copy: shares b's memory
    assert wrapped.data_ptr == b.data_ptr()
    with pytest.raises(fl.BorrowError):
        vecadd.launch(4, 256, (buf[:1024], b, wrapped))
    torch.cuda.synchronize()
    assert torch.equal(buf[1024:], torch.ones(1024, device="cuda"))


# ---------------------------------------------------------------------------------- streams


def test_streams_of_every_kind(vecadd: GpuLaunchPlan) -> None:
    torch = pytest.importorskip("torch")
    n = 1 << 15
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    expected = a + b
    torch.cuda.synchronize()
    s = Stream()
    ts = torch.cuda.Stream()
    for stream in (None, s, ts, Stream(ts), ts.cuda_stream):
        c = torch.zeros(n, device="cuda")
        torch.cuda.synchronize()
        vecadd.launch(_grid(n), 256, (a, b, c), stream=stream)
        if stream is None:
            synchronize()
        elif isinstance(stream, Stream):
            stream.synchronize()
        else:
            ts.synchronize()
        assert torch.equal(c, expected), f"stream {stream!r}"
    cupy = pytest.importorskip("cupy")
    cs = cupy.cuda.Stream(non_blocking=True)
    c = torch.zeros(n, device="cuda")
    torch.cuda.synchronize()
    vecadd.launch(_grid(n), 256, (a, b, c), stream=cs)
    cs.synchronize()
    assert torch.equal(c, expected)


# ----------------------------------------------------------------------------- device errors


def test_device_error_raises_at_synchronize_and_the_context_survives(vecadd: GpuLaunchPlan) -> None:
    n = 1024
    short = tensor.full(1000, 1.0, dtype=F32)
    a, b, c = tensor.full(n, 1.0, dtype=F32), tensor.full(n, 2.0, dtype=F32), tensor.zeros(n, F32)
    vecadd.launch(4, 256, (short, b, c))
    with pytest.raises(
        fl.KernelIndexError, match=r"the len is 1000 but the index is 10[0-2]\d"
    ) as err:
        synchronize()
    e = err.value
    assert e.loc == SITE_A and e.diagnostic.label == "read out of bounds"
    index = int(e.message.rsplit(" ", 1)[1])
    assert e.diagnostic.notes == [
        f"reading `a` in kernel `vecadd`, block (3, 0, 0), thread ({index - 768}, 0, 0)"
    ]
    synchronize()  # reported once
    vecadd.launch(4, 256, (a, b, c))  # the context and the kernel still work
    synchronize()
    assert (c.numpy() == 3.0).all()


def test_numpy_and_stream_synchronize_report_device_errors(vecadd: GpuLaunchPlan) -> None:
    short = tensor.full(10, 1.0, dtype=F32)
    b, c = tensor.full(64, 2.0, dtype=F32), tensor.zeros(64, F32)
    vecadd.launch(1, 64, (b, short, c))
    with pytest.raises(fl.KernelIndexError, match="the len is 10") as err:
        c.numpy()  # never hands out the output of a failed kernel without saying so
    assert err.value.loc == SITE_B
    s = Stream()
    vecadd.launch(1, 64, (short, b, c), stream=s)
    with pytest.raises(fl.KernelIndexError):
        s.synchronize()


def test_sync_knob_raises_at_the_launch(
    vecadd: GpuLaunchPlan, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEARLESS_SYNC", "1")
    short = tensor.full(10, 1.0, dtype=F32)
    b, c = tensor.full(64, 2.0, dtype=F32), tensor.zeros(64, F32)
    with pytest.raises(fl.KernelIndexError, match="the len is 10"):
        vecadd.launch(1, 64, (short, b, c))


# ----------------------------------------------------------------------------------- tensors

DTYPE_VALUES = [
    (fl.bool_, True), (fl.i8, -3), (fl.u8, 200), (fl.i16, -300), (fl.u16, 60000), (fl.f16, 1.5),
    (fl.bf16, 1.5), (fl.i32, -70000), (fl.u32, 4_000_000_000), (fl.f32, 0.25), (fl.i64, -(2**40)),
    (fl.u64, 2**63 + 5), (fl.f64, 1e300),
]  # fmt: skip


@pytest.mark.parametrize(("dtype", "value"), DTYPE_VALUES, ids=lambda v: str(v))
def test_full_and_round_trips_for_every_dtype(dtype: fl.dtypes.DType, value: object) -> None:
    t = tensor.full(37, value, dtype=dtype)  # type: ignore[arg-type]
    assert t.target == "cuda" and t.dtype is dtype and t.nbytes == 37 * dtype.itemsize
    out = t.numpy()
    if dtype is fl.bf16:
        out = out.view(np.uint16)  # ml_dtypes' bfloat16, over the raw bits
    want = 0x3FC0 if dtype is fl.bf16 else value
    assert out.dtype == dtype.np and (out == np.array(want, dtype=dtype.np)).all()
    assert not tensor.zeros(5, dtype).numpy().any()
    host = np.arange(11).astype(dtype.np)
    assert (tensor.asarray(host).numpy() == host).all()


def test_tensor_basics_on_the_gpu() -> None:
    r = tensor.arange(10, dtype=fl.f64)
    assert r.numpy().tolist() == list(range(10))
    assert "target='cuda'" in repr(r) and len(r) == 10
    assert tensor.empty(0).numpy().shape == (0,)
    two_d = tensor.asarray(np.ones((3, 4), np.float32))
    assert two_d.shape == (3, 4) and two_d.numpy().sum() == 12
    cai = r.__cuda_array_interface__
    assert cai["data"] == (r.data_ptr, False) and cai["typestr"] == "<f8" and cai["version"] == 3


def test_tensor_interop_with_torch_and_cupy() -> None:
    torch = pytest.importorskip("torch")
    t = tensor.arange(16, dtype=F32)
    via_cai = torch.as_tensor(t, device="cuda")
    assert via_cai.data_ptr() == t.data_ptr and via_cai.tolist() == list(range(16))
    via_dlpack = torch.from_dlpack(t)
    assert via_dlpack.data_ptr() == t.data_ptr and via_dlpack.device.type == "cuda"
    via_dlpack[0] = 42.0
    torch.cuda.synchronize()
    assert t.numpy()[0] == 42.0  # one memory
    back = tensor.asarray(via_dlpack)
    assert back.data_ptr == t.data_ptr and back.dtype is F32
    assert tensor.asarray(torch.ones(3)).target == "cuda"  # a CPU tensor is copied over
    cupy = pytest.importorskip("cupy")
    c = cupy.asarray(t)
    assert c.data.ptr == t.data_ptr and float(c[0]) == 42.0
    from_cupy = tensor.asarray(cupy.arange(8, dtype=cupy.float32))
    assert from_cupy.numpy().tolist() == list(range(8))


def test_cupy_arrays_launch_through_the_generic_path(vecadd: GpuLaunchPlan) -> None:
    cupy = pytest.importorskip("cupy")
    n = 1000
    a, b = cupy.arange(n, dtype=cupy.float32), cupy.ones(n, dtype=cupy.float32)
    c = cupy.zeros(n, dtype=cupy.float32)
    vecadd.launch(_grid(n), 256, (a, b, c))
    synchronize()
    assert cupy.array_equal(c, a + b)
    with pytest.raises(fl.KernelTypeError, match="`a` has element type f64"):
        vecadd.launch(_grid(n), 256, (a.astype(cupy.float64), b, c))
