"""Module globals and closure variables a kernel reads are followed from launch to launch.

The compiled form holds their values (constants folded in, device functions inlined); each
launch compares every one with the object the compile read, by identity, and compiles again
when one was bound to another value (frontend/source.py). Both tracks, the simulator and the
fake GPU driver, and the cache keys: editing a kernel or a device function it calls, or
binding a global it reads to another value, gives another key.
"""

from __future__ import annotations

import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fearless as fl
from fearless import config
from fearless.abi import CompiledTile
from fearless.frontend.source import changed_names, make_guard
from fearless.runtime import device_errors, driver, target
from fearless.runtime.tensor import Tensor
from fearless.simt import compiler as simt_compiler
from fearless.tile import compiler as tile_compiler
from support.fake_driver import FakeDriver, HostErrorPool, fake_gpu  # noqa: F401
from support.fake_tile_driver import FakeCU

HEADER = "import fearless as fl\nfrom fearless import simt, tile\n"

SIMT = """
SCALE = 2.0
OFFSET = 0.0

@simt.device
def affine(v: fl.f32) -> fl.f32:
    return v * SCALE + OFFSET

@simt.kernel
def scale(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = x[i] * SCALE

@simt.kernel
def via_device(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = affine(x[i])
"""

CLOSURE = """
def make(c):
    @simt.device
    def times(v: fl.f32) -> fl.f32:
        return v * c

    @simt.kernel
    def direct(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = x[i] * c

    @simt.kernel
    def through(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
        i = simt.thread.index_1d()
        if i < len(out):
            out[i] = times(x[i])

    @tile.kernel
    def tiled(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
        z.store(tile.load_like(x, z) * c)

    def set_c(value):
        nonlocal c
        c = value

    return direct, through, tiled, set_c
"""

TILE = """
SCALE = 2.0

@tile.kernel
def tscale(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) * SCALE)
"""


def _module(tmp_path: Path, name: str, body: str, **extra: Any) -> dict[str, Any]:
    """Run `body` as the module `name` from a file (kernels need their source in a file)."""
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(body))
    scope: dict[str, Any] = {"__name__": name, "__file__": str(path), **extra}
    exec(compile(path.read_text(), str(path), "exec"), scope)
    return scope


def _run(kernel: Any, n: int = 8) -> np.ndarray:
    x = fl.arange(0.0, float(n))
    out = fl.empty(n)
    kernel[1, n](x, out)
    return out.numpy()


def _run_tile(kernel: Any, n: int = 8) -> np.ndarray:
    x = fl.arange(0.0, float(n))
    z = fl.empty(n)
    zp = z.partition((n,))
    kernel(zp, x)
    return zp.unpartition().numpy()


# -------------------------------------------------------------------------- SIMT, simulator


def test_a_global_bound_again_is_compiled_in(tmp_path: Path) -> None:
    m = _module(tmp_path, "g_simt", SIMT)
    assert list(_run(m["scale"])[:3]) == [0.0, 2.0, 4.0]
    m["SCALE"] = 3.0
    assert list(_run(m["scale"])[:3]) == [0.0, 3.0, 6.0]
    assert "constant {value=3.0}" in m["scale"].inspect(stage="ir")


def test_a_global_of_a_device_function_is_followed(tmp_path: Path) -> None:
    m = _module(tmp_path, "g_device", SIMT)
    assert list(_run(m["via_device"])[:3]) == [0.0, 2.0, 4.0]
    m["OFFSET"] = 1.0
    assert list(_run(m["via_device"])[:3]) == [1.0, 3.0, 5.0]
    m["SCALE"] = 10.0
    assert list(_run(m["via_device"])[:3]) == [1.0, 11.0, 21.0]


def test_a_device_function_name_bound_to_another_is_followed(tmp_path: Path) -> None:
    m = _module(tmp_path, "g_rebind", SIMT)
    assert list(_run(m["via_device"])[:3]) == [0.0, 2.0, 4.0]
    other = _module(tmp_path, "g_rebind_other", SIMT.replace("v * SCALE + OFFSET", "v - 1.0"))
    m["affine"] = other["affine"]
    assert list(_run(m["via_device"])[:3]) == [-1.0, 0.0, 1.0]


def test_closure_variables_are_followed(tmp_path: Path) -> None:
    m = _module(tmp_path, "g_closure", CLOSURE)
    direct, through, tiled, set_c = m["make"](2.0)
    assert list(_run(direct)[:3]) == [0.0, 2.0, 4.0]
    assert list(_run(through)[:3]) == [0.0, 2.0, 4.0]
    assert list(_run_tile(tiled)[:3]) == [0.0, 2.0, 4.0]
    set_c(5.0)
    assert list(_run(direct)[:3]) == [0.0, 5.0, 10.0]
    assert list(_run(through)[:3]) == [0.0, 5.0, 10.0]
    assert list(_run_tile(tiled)[:3]) == [0.0, 5.0, 10.0]


def test_prepared_launches_follow_too(tmp_path: Path) -> None:
    m = _module(tmp_path, "g_prepared", SIMT)
    k = m["scale"]
    prep = k.prepare(1, 8)
    x, out = fl.arange(0.0, 8.0), fl.empty(8)
    k(prep, x, out)
    assert out.numpy()[1] == 2.0
    m["SCALE"] = 4.0
    k(prep, x, out)
    assert out.numpy()[1] == 4.0
    m["SCALE"] = 5.0
    prep(x, out)
    assert out.numpy()[1] == 5.0
    fresh = k.prepare(1, 8)  # prepared after the change: the warm path again
    assert fresh.guard() and not prep.guard() and fresh.launcher is not prep.launcher
    k(fresh, x, out)
    assert out.numpy()[1] == 5.0


def test_an_equal_value_keeps_the_compiled_form(tmp_path: Path) -> None:
    m = _module(tmp_path, "g_equal", SIMT)
    k = m["scale"]
    _run(k)
    ir, prep = k._ir, k.prepare(1, 8)
    m["SCALE"] = float("2.0")  # another float object, the same value: nothing to recompile
    assert not k._guard.fresh() and not prep.guard()
    _run(k)
    assert k._ir is ir and k._prepared_launcher(prep) is prep.launcher
    m["SCALE"] = 2  # an int is not a float: it compiles differently
    _run(k)
    assert k._ir is not ir and k._prepared_launcher(prep) is not prep.launcher


def test_a_deleted_global_is_reported_at_the_next_launch(tmp_path: Path) -> None:
    m = _module(tmp_path, "g_deleted", SIMT)
    _run(m["scale"])
    del m["SCALE"]
    with pytest.raises(fl.CompileError, match="cannot find value `SCALE`"):
        _run(m["scale"])


def test_the_guard_compares_identity_and_skips_modules(tmp_path: Path) -> None:
    m = _module(tmp_path, "g_guard", SIMT)
    refs = simt_compiler.global_refs(m["via_device"].spec)
    names = {r.name for r in refs}
    assert {"affine", "SCALE", "OFFSET", "fl", "simt"} <= names
    assert "x" not in names and "i" not in names  # parameters and locals are not globals
    fresh = make_guard(refs)
    assert fresh() and changed_names(refs) == []
    m["fl"] = types.ModuleType("fl")  # modules are not watched (as in Triton)
    assert fresh()
    m["OFFSET"] = 0.0 + 0.0 * len(names)  # equal, but another object: the guard says so
    assert not fresh() and changed_names(refs) == ["OFFSET"]


def test_a_local_named_like_a_global_is_not_watched(tmp_path: Path) -> None:
    m = _module(tmp_path, "g_local", SIMT + "\nx = 1.0\ni = 2\nout = 3\n")
    k = m["scale"]
    _run(k)
    ir = k._ir
    m["x"], m["i"], m["out"] = 7.0, 8, 9  # module-level script variables, not the kernel's
    assert k._guard.fresh()
    _run(k)
    assert k._ir is ir


# ---------------------------------------------------------------------- Tile, simulator


def test_a_tile_kernel_follows_its_globals(tmp_path: Path) -> None:
    m = _module(tmp_path, "g_tile", TILE)
    k = m["tscale"]
    assert list(_run_tile(k)[:3]) == [0.0, 2.0, 4.0]
    assert list(_run_tile(k)[:3]) == [0.0, 2.0, 4.0]  # warm
    m["SCALE"] = 3.0
    assert list(_run_tile(k)[:3]) == [0.0, 3.0, 6.0]
    assert "tile.constant {value=3.0}" in k.inspect(stage="ir")


# ----------------------------------------------------------------------- fake GPU driver


def test_gpu_launch_recompiles_with_the_new_value(
    tmp_path: Path,
    fake_gpu: FakeDriver,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(target, "_probe", (True, "Fake H200 (sm_90)", "sm_90"))
    monkeypatch.setattr(device_errors, "_pool", HostErrorPool())
    monkeypatch.setenv("FEARLESS_TARGET", "cuda")
    monkeypatch.setattr(config, "_target_override", None)
    loaded: list[Any] = []
    real_load = driver.load_kernel
    monkeypatch.setattr(driver, "load_kernel", lambda ck: loaded.append(ck) or real_load(ck))
    m = _module(tmp_path, "g_gpu", SIMT)
    k = m["via_device"]
    a = Tensor._make(0x10000, (128,), fl.f32, on_device=True, owner=None)
    c = Tensor._make(0x20000, (128,), fl.f32, on_device=True, owner=None)
    key_before = simt_compiler.cache_key(k.spec, "sm_90")
    fake_gpu.plan = k._launcher().plan  # type: ignore[attr-defined]
    k[4, 32](a, c)
    k[4, 32](a, c)
    assert len(loaded) == 1 and len(fake_gpu.calls) == 2
    m["OFFSET"] = 0.5
    key_after = simt_compiler.cache_key(k.spec, "sm_90")
    assert key_after != key_before
    fake_gpu.plan = k._launcher().plan  # type: ignore[attr-defined]
    k[4, 32](a, c)
    assert len(loaded) == 2 and len(fake_gpu.calls) == 3
    assert loaded[0].ptx != loaded[1].ptx  # the binary built for OFFSET = 0.5
    assert "0f3F000000" in loaded[1].ptx  # 0.5 as a PTX f32 literal
    assert "0f3F000000" not in loaded[0].ptx


def test_tile_gpu_launch_recompiles_with_the_new_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeCU()
    monkeypatch.setattr(driver, "_cu", fake)
    monkeypatch.setattr(driver, "load_kernel", lambda ck: driver.LoadedKernel(
        ck.name, ck.entry, f"CUfunction:{ck.name}", 1, None, 1, 32, "cubin"))  # fmt: skip
    monkeypatch.setattr(target, "_probe", (True, "Fake H200 (sm_90)", "sm_90"))
    monkeypatch.setenv("FEARLESS_TARGET", "cuda")
    monkeypatch.delenv("FEARLESS_ARCH", raising=False)
    keys: list[str] = []

    def compile_cubin(ir: Any, arch: str) -> CompiledTile:
        keys.append(tile_compiler.cache_key(ir, arch))
        return CompiledTile(ir.name, arch, ir.signature, b"", b"\x7fELF")

    monkeypatch.setattr(sys.modules["fearless.tile.compiles"], "compile_cubin", compile_cubin)
    m = _module(tmp_path, "g_tile_gpu", TILE)
    k = m["tscale"]
    z = Tensor._make(0x10000, (256,), fl.f32, on_device=True, owner=None)
    x = Tensor._make(0x20000, (256,), fl.f32, on_device=True, owner=None)
    fake.sizes = [8, 4, 8, 4]
    for _ in range(2):
        zp = z.partition((128,))
        k(zp, x)
        z = zp.unpartition()
    assert len(keys) == 1 and len(fake.calls) == 2
    m["SCALE"] = 3.0
    zp = z.partition((128,))
    k(zp, x)
    assert len(keys) == 2 and keys[0] != keys[1] and len(fake.calls) == 3


# ------------------------------------------------------------------------------ cache keys


def _simt_key(tmp_path: Path, name: str, body: str, kernel: str, **extra: Any) -> str:
    m = _module(tmp_path, name, body, **extra)
    return simt_compiler.cache_key(m[kernel].spec, "sm_90")


def test_editing_a_kernel_changes_its_simt_cache_key(tmp_path: Path) -> None:
    base = _simt_key(tmp_path, "k_a", SIMT, "scale")
    assert _simt_key(tmp_path, "k_b", SIMT, "scale") == base  # same text: same key
    edited = SIMT.replace("out[i] = x[i] * SCALE", "out[i] = x[i] * SCALE + 1.0")
    assert _simt_key(tmp_path, "k_c", edited, "scale") != base
    assert _simt_key(tmp_path, "k_d", SIMT.replace("SCALE = 2.0", "SCALE = 2.5"), "scale") != base


def test_editing_a_device_function_changes_the_simt_cache_key(tmp_path: Path) -> None:
    base = _simt_key(tmp_path, "d_a", SIMT, "via_device")
    edited = SIMT.replace("return v * SCALE + OFFSET", "return v * SCALE - OFFSET")
    assert _simt_key(tmp_path, "d_b", edited, "via_device") != base
    nested = SIMT.replace(
        "@simt.device\ndef affine",
        "@simt.device\ndef inner(v: fl.f32) -> fl.f32:\n"
        "    return v + {}\n\n@simt.device\ndef affine",
    ).replace("return v * SCALE + OFFSET", "return inner(v) * SCALE")
    one = _simt_key(tmp_path, "d_c", nested.format("1.0"), "via_device")
    two = _simt_key(tmp_path, "d_d", nested.format("2.0"), "via_device")
    assert one != two  # a device function called by a device function


HELPERS = """
BIAS = {bias}

@simt.device
def shift(v: fl.f32) -> fl.f32:
    return v + {add}
"""

USES_HELPERS = """
@simt.kernel
def shifted(x: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = helpers.shift(x[i]) * helpers.BIAS
"""


def test_a_device_function_or_constant_of_another_module_is_in_the_cache_key(
    tmp_path: Path,
) -> None:
    """`helpers.shift(...)` and `helpers.BIAS`: found through the module's attributes."""

    def key(name: str, add: str, bias: str) -> str:
        helpers = types.ModuleType("helpers")  # a module is keyed by its name
        path = tmp_path / f"{name}_helpers.py"
        path.write_text(HEADER + textwrap.dedent(HELPERS.format(add=add, bias=bias)))
        helpers.__file__ = str(path)
        exec(compile(path.read_text(), str(path), "exec"), helpers.__dict__)
        return _simt_key(tmp_path, name, USES_HELPERS, "shifted", helpers=helpers)

    base = key("h_a", "1.0", "2.0")
    assert key("h_b", "1.0", "2.0") == base
    assert key("h_c", "5.0", "2.0") != base  # the device function's body
    assert key("h_d", "1.0", "3.0") != base  # the module's constant


def test_editing_a_tile_kernel_changes_its_cache_key(tmp_path: Path) -> None:
    def key(name: str, body: str) -> str:
        k = _module(tmp_path, name, body)["tscale"]
        return tile_compiler.cache_key(k.ir_for(k.static_signature()), "sm_90")

    base = key("t_a", TILE)
    assert key("t_b", TILE) == base
    assert key("t_c", TILE.replace("* SCALE)", "* SCALE + 1.0)")) != base  # the source
    assert key("t_d", TILE.replace("SCALE = 2.0", "SCALE = 4.0")) != base  # a global's value
    # the source alone, with the same tile IR (its text gives the compiled form's locations)
    moved = TILE.replace("    z.store(", "    # scaled copy\n    z.store(")
    assert key("t_e", moved) != base
