"""Launch errors name the user's file and line, with a documented code.

Keyword arguments to a launch are E0061 (parameters are bound by position); a missing or
malformed launch configuration, a PreparedLaunch of another kernel and a `tile.*` function
called on the host say where, through `runtime.location.user_location()`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import fearless as fl
from fearless import simt, tile
from fearless.errors import CODES, FearlessError


@simt.kernel
def scale(x: simt.Slice[fl.f32], alpha: fl.f32, out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = alpha * x[i]


@simt.kernel
def copy(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = x[i]


@simt.kernel
def launches_a_kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    copy[1, 8](x, out)


@simt.kernel
def calls_a_kernel(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    copy(x, out)


@tile.kernel
def tcopy(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z))


def _error(call: Callable[[], Any], kind: type[FearlessError], code: str) -> FearlessError:
    """The error `call` raises, checked to name this file at the line the lambda is on."""
    with pytest.raises(kind) as info:
        call()
    err = info.value
    assert err.code == code and code in CODES
    assert err.loc is not None, str(err)
    assert err.loc.file == __file__
    assert err.loc.line == call.__code__.co_firstlineno
    assert f"{__file__}:{err.loc.line}:" in str(err)
    return err


def _arrays() -> tuple[fl.Tensor, fl.Tensor]:
    return fl.arange(0.0, 8.0), fl.empty(8)


def test_keyword_arguments_to_a_simt_launch_are_e0061() -> None:
    x, out = _arrays()
    err = _error(lambda: scale[1, 8](x=x, alpha=2.0, out=out), fl.KernelTypeError, "E0061")
    assert "`scale` takes its arguments by position" in err.message
    assert "`x=`, `alpha=`, `out=`" in err.message
    assert err.help == "pass one argument per parameter, in order: scale(x, alpha, out)"
    _error(lambda: scale[1, 8](x, 2.0, out=out), fl.KernelTypeError, "E0061")
    prep = scale.prepare(1, 8)
    _error(lambda: scale(prep, x, 2.0, out=out), fl.KernelTypeError, "E0061")
    _error(lambda: prep(x, 2.0, out=out), fl.KernelTypeError, "E0061")
    scale[1, 8](x, 2.0, out)  # still launches
    assert out.numpy()[3] == 6.0


def test_keyword_arguments_to_a_tile_launch_are_e0061() -> None:
    x, z = _arrays()
    zp = z.partition((8,))
    err = _error(lambda: tcopy(z=zp, x=x), fl.KernelTypeError, "E0061")
    assert "`tcopy` takes its arguments by position" in err.message
    assert err.help == "pass one argument per parameter, in order: tcopy(z, x)"
    tcopy(zp, x)  # nothing moved or launched by the refusal
    assert zp.unpartition().numpy()[5] == 5.0


def test_a_missing_launch_configuration_names_the_line() -> None:
    x, out = _arrays()
    err = _error(lambda: copy(x, out), fl.LaunchContractError, "E0700")
    assert err.message == "`copy` needs a launch configuration"
    _error(lambda: copy(), fl.LaunchContractError, "E0700")


def test_a_prepared_launch_of_another_kernel_names_the_line() -> None:
    x, out = _arrays()
    prep = scale.prepare(1, 8)
    err = _error(lambda: copy(prep, x, out), fl.LaunchContractError, "E0700")
    assert err.message == "this PreparedLaunch belongs to `scale`, not `copy`"


def test_a_malformed_launch_configuration_names_the_line() -> None:
    for err in (
        _error(lambda: copy[4], fl.LaunchContractError, "E0700"),
        _error(lambda: copy[1, 2, 3, 4], fl.LaunchContractError, "E0700"),
        _error(lambda: copy[[1, 2]], fl.LaunchContractError, "E0700"),
    ):
        assert err.message == "`copy[...]` takes a launch configuration `[grid, block]`"


def test_a_tile_function_on_the_host_is_a_documented_code_at_the_line() -> None:
    x, _ = _arrays()
    err = _error(lambda: tile.load(x, (0,), (8,)), fl.FearlessError, "E0605")
    assert err.message == "`tile.load` can only be called inside a @tile.kernel"
    err = _error(lambda: tile.abs_(x), fl.FearlessError, "E0605")
    assert err.message == "`tile.abs` can only be called inside a @tile.kernel"


def test_a_simt_function_on_the_host_is_the_same_code_at_the_line() -> None:
    """simt.thread, simt.warp, simt.shared, simt.atomic, simt.cg and the coordinates outside
    a kernel: E0605 at the user's line, as tile's (they were bare RuntimeErrors)."""
    x, _ = _arrays()
    for call, what in (
        (lambda: simt.thread.index_1d(), "`simt.thread.index_1d()` can only be called"),
        (lambda: simt.grid(1), "`simt.grid()` can only be called"),
        (lambda: simt.syncthreads(), "`simt.syncthreads()` can only be called"),
        (lambda: simt.shared.array((4,), fl.f32), "`simt.shared.array()` can only be called"),
        (lambda: simt.warp.shfl(1, 0), "`simt.warp.shfl()` can only be called"),
        (lambda: simt.atomic.add(x, 0, 1.0), "`simt.atomic.add()` can only be called"),
        (lambda: simt.cg.this_grid(), "`simt.cg.this_grid()` can only be called"),
        (lambda: range(simt.threadIdx.x), "can only be read inside a @simt.kernel"),
    ):
        err = _error(call, fl.FearlessError, "E0605")
        assert what in err.message, err.message
        assert "on the host, use NumPy" in str(err)


def test_a_kernel_launched_or_called_inside_a_kernel_names_the_line() -> None:
    """The frontend refuses both at compile time, at the kernel's line (simt/access.py and
    simt/intrinsics.py word these; `Kernel.__getitem__` and `__call__` are never reached)."""
    x, out = _arrays()
    with pytest.raises(fl.FearlessError) as info:
        launches_a_kernel[1, 8](x, out)
    assert info.value.loc is not None and info.value.loc.file == __file__
    assert "copy[1, 8](x, out)" in str(info.value)
    with pytest.raises(fl.CompileError) as info2:
        calls_a_kernel[1, 8](x, out)
    assert info2.value.code == "E0605" and info2.value.loc is not None
    assert "copy(x, out)" in str(info2.value)


@simt.device
def twice(v: fl.f32) -> fl.f32:
    return v * 2.0


def test_a_device_function_on_the_host_is_e0605_at_the_line() -> None:
    err = _error(lambda: twice(1.0), fl.FearlessError, "E0605")
    assert err.message == "device function `twice` can only be called from a kernel"
    assert twice.func(1.0) == 2.0  # what the help offers


def test_an_unknown_stage_is_a_compile_error_on_both_tracks() -> None:
    with pytest.raises(fl.CompileError, match="unknown stage 'bytecode' for a SIMT kernel") as e:
        copy.inspect(stage="bytecode")
    assert e.value.code in CODES and e.value.code != "E0000"


def test_a_tensor_made_directly_names_the_constructors() -> None:
    err = _error(lambda: fl.Tensor((4,)), fl.KernelTypeError, "E0701")
    assert err.message == "fl.Tensor is not constructed directly"
    assert "fl.empty, fl.zeros, fl.full, fl.arange or fl.asarray" in str(err)
