"""runtime/driver.py `ptx_to_cubin`: PTX linked into a cubin by nvJitLink through cuda.bindings
(no GPU needed), the driver's cuLink through cuda.core only where nvJitLink gives nothing, and
a fresh process's first SIMT compile never importing cuda.core (its import was most of that
compile's time: 0.3 to 0.8 s against nvJitLink's 0.05 s)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fearless.runtime import driver

REPO = Path(__file__).resolve().parents[1]
PTX = b"""//
.version 8.0
.target sm_90
.address_size 64
.visible .entry empty()
{
    ret;
}
"""


def _nvjitlink_or_skip() -> None:
    try:
        from cuda.bindings import nvjitlink

        nvjitlink.destroy(nvjitlink.create(1, ["-arch=sm_90"]))
    except Exception as exc:  # no cuda-bindings or no libnvJitLink on this machine
        pytest.skip(f"nvJitLink is not usable here: {exc}")


def test_nvjitlink_links_ptx_into_a_cubin_without_a_gpu() -> None:
    _nvjitlink_or_skip()
    cubin = driver.ptx_to_cubin(PTX.decode(), "sm_90")
    assert cubin is not None and cubin[:4] == b"\x7fELF"
    assert driver.ptx_to_cubin(PTX, "sm_90") == cubin  # str or bytes alike


def test_ptx_nvjitlink_refuses_falls_back_to_the_drivers_link(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []
    monkeypatch.setattr(driver, "_nvjitlink", lambda code, arch: asked.append("nvjitlink"))
    monkeypatch.setattr(driver, "_culink", lambda code, arch: asked.append("culink") or b"cubin")
    assert driver.ptx_to_cubin(PTX, "sm_90") == b"cubin"
    assert asked == ["nvjitlink", "culink"]


def test_bad_ptx_gives_none_not_an_exception() -> None:
    _nvjitlink_or_skip()
    assert driver._nvjitlink(b".version 8.0\n.target sm_90\nnot ptx at all\n", "sm_90") is None


def test_a_fresh_process_compiles_simt_without_importing_cuda_core(tmp_path: Path) -> None:
    _nvjitlink_or_skip()
    code = (
        "import sys; sys.path.insert(0, 'examples')\n"
        "import simt_kernels\n"
        "ck = simt_kernels.vecadd.compile('sm_90')\n"
        "assert ck.cubin[:4] == b'\\x7fELF', 'no cubin'\n"
        "print('cuda.core' in sys.modules)\n"
    )
    env = {**os.environ, "FEARLESS_CACHE_DIR": str(tmp_path), "FEARLESS_TARGET": "sim"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False", out.stdout + out.stderr
