"""The walk of a warm Tile launch (issue 34): from `Kernel.__call__` to the driver it enters no
file twice. The Python files a warm call enters are recorded with `sys.setprofile` on the
"cuda" path, over the fake driver of tests/support/fake_tile_driver.py and a recording
cuLaunchKernel behind the compiled launcher (claunch_tile.c), as on a GPU: kernel.py, the
staleness and target checks, then dispatch.py, which hands the call to C (which asks
streams.py for the default stream). The Python warm path (no compiled launcher) is walked too:
it may enter a runtime helper and come back, but never re-enters the tile track."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import fearless as fl
from fearless import tile
from fearless.runtime import claunch, driver
from support import fake_tile_driver
from support.fake_claunch import FUNCTION, LAUNCH
from support.fake_tile_driver import FakeCU, _dev

fake_gpu = fake_tile_driver.fake_gpu  # the fixture

SRC = Path(fl.__file__).resolve().parent


@tile.kernel
def add3(z: tile.Part[fl.f32], x: tile.Tensor[fl.f32], y: tile.Tensor[fl.f32]):
    z.store(tile.load_like(x, z) + tile.load_like(y, z))


@pytest.fixture
def c_launches(fake_gpu: FakeCU, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The compiled launcher's cuLaunchKernel, recording its grid's x (skips where the
    launcher does not build)."""
    if claunch.module() is None:
        pytest.skip(f"no compiled launcher here: {claunch.unavailable_reason()}")
    grids: list[int] = []

    def record(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):  # type: ignore[no-untyped-def]
        grids.append(gx)
        return 0

    callback = LAUNCH(record)
    address = ctypes.cast(callback, ctypes.c_void_p).value
    monkeypatch.setattr(claunch, "driver_launch_address", lambda: address)
    monkeypatch.setattr(driver, "load_kernel", lambda ck: driver.LoadedKernel(
        ck.name, ck.entry, FUNCTION, 1, None, 1, 32, "cubin"))  # fmt: skip
    add3._dispatch = None
    add3.compiles.gpu.clear()
    yield grids
    add3._dispatch = None
    add3.compiles.gpu.clear()
    del callback


def walk(call: Callable[[], Any]) -> list[str]:
    """The fearless source files `call` enters, in order, a run of calls in one file counted
    once (its own frames and the standard library's are left out)."""
    files: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        path = Path(frame.f_code.co_filename)
        if SRC in path.parents and (not files or files[-1] != path.name):
            files.append(str(path.relative_to(SRC)))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return files


def _arrays() -> tuple[Any, Any, Any]:
    z = _dev(0x10000, (40, 100)).partition((16, 128))
    return z, _dev(0x20000, (40, 100)), _dev(0x30000, (40, 100))


def test_a_warm_tile_launch_enters_no_file_twice_on_its_way_to_c(c_launches: list[int]) -> None:
    z, x, y = _arrays()
    add3(z, x, y)  # the slow path prepares it, and the compiled warm path is made
    add3(z, x, y)
    assert add3._dispatch is not None and add3._dispatch.c is not None
    before = len(c_launches)
    files = walk(lambda: add3(z, x, y))
    assert len(c_launches) == before + 1 and c_launches[-1] == 3  # launched in C
    assert len(files) == len(set(files)), files
    # kernel.py, the staleness and target checks, dispatch.py, and streams.py for the default
    # stream, which the C path asks as streams.py decides it
    assert files[0] == "tile/kernel.py" and "runtime/dispatch.py" in files, files
    assert len(files) <= 6, files


def test_the_python_warm_path_leaves_the_tile_track_once(fake_gpu: FakeCU) -> None:
    """Without the compiled launcher (FEARLESS_CLAUNCH=0, or no C compiler) the dispatcher's
    Python path launches: after kernel.py, every file it enters is the runtime's."""
    add3._dispatch = None
    add3.compiles.gpu.clear()
    z, x, y = _arrays()
    fake_gpu.sizes = [8, 4, 4, 4] * 3
    add3(z, x, y)
    add3._dispatch.c = None  # type: ignore[union-attr]
    files = walk(lambda: add3(z, x, y))
    assert len(fake_gpu.calls) == 2
    assert files.count("tile/kernel.py") == 1 and files[0] == "tile/kernel.py", files
    assert all(not f.startswith(("tile/", "simt/", "ops/")) for f in files[1:]), files
    add3._dispatch = None
    add3.compiles.gpu.clear()
