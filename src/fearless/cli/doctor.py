"""`fearless doctor`: checks everything fearless needs and says how to fix what is missing.

Each check is a small function returning a `Check`, so tests (and `fearless demo`, which reuses
`probe_gpu`) can call them one by one. A check fails (✗) only when something required is
missing; an optional piece (a GPU, tileiras, torch) is a warning (⚠) with the fix.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .. import config
from ..backends import toolchain
from . import fearless_version

Status = Literal["ok", "warn", "fail"]
SYMBOLS: dict[str, str] = {"ok": "✓", "warn": "⚠", "fail": "✗"}

MIN_PYTHON = (3, 10)
NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
# tileiras needs a libnvvm from CUDA 13.1 or newer (DESIGN section 4).
MIN_TILEIRAS_CUDA = (13, 1)


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, how it went, and the fix when it did not."""

    name: str
    status: Status
    detail: str
    fix: str | None = None

    def render(self, width: int = 13) -> str:
        line = f"{SYMBOLS[self.status]} {self.name:<{width}} {self.detail}"
        if self.fix:
            line += f"\n  {'':<{width}} fix: {self.fix}"
        return line


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_python() -> Check:
    v = sys.version_info
    text = f"{v.major}.{v.minor}.{v.micro} ({sys.executable})"
    if (v.major, v.minor) < MIN_PYTHON:
        return Check("Python", "fail", text, "fearless needs Python 3.10 or newer")
    return Check("Python", "ok", text)


def check_numpy() -> Check:
    try:
        numpy = importlib.import_module("numpy")
    except Exception as exc:  # a broken install can raise more than ImportError
        return Check("NumPy", "fail", f"cannot import: {exc}", "pip install 'numpy>=1.24'")
    return Check("NumPy", "ok", str(numpy.__version__))


def check_llvmlite() -> Check:
    """llvmlite imports and its LLVM has the NVPTX target (the SIMT track's code generator)."""
    fix = "pip install 'llvmlite>=0.44' (the PyPI wheels include the NVPTX target)"
    try:
        llvmlite = importlib.import_module("llvmlite")
        llvm = importlib.import_module("llvmlite.binding")
    except Exception as exc:
        return Check("llvmlite", "fail", f"cannot import: {exc}", fix)
    llvm_version = ".".join(str(p) for p in llvm.llvm_version_info)
    text = f"{llvmlite.__version__} (LLVM {llvm_version})"
    try:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        llvm.Target.from_triple(NVPTX_TRIPLE)
    except Exception as exc:
        return Check("llvmlite", "fail", f"{text}: no NVPTX target ({exc})", fix)
    return Check("llvmlite", "ok", f"{text}, NVPTX target ready")


def _version_and_path(path: Path) -> str:
    return f"{toolchain.tool_version(path) or 'unknown version'}  {path}"


def _found(
    name: str,
    path: Path | None,
    status: Status,
    missing: str,
    fix: str,
    detail: Callable[[Path], str] = _version_and_path,
) -> Check:
    """The check of a tool (or file) looked up at `path`: ok with `detail(path)` (by default
    the tool's version and path) when it was found; `status` with `missing` and `fix` when not."""
    if path is None:
        return Check(name, status, missing, fix)
    return Check(name, "ok", detail(path))


def check_libdevice() -> Check:
    missing = "libdevice.10.bc not found (math functions in kernels need it)"
    path = toolchain.find_libdevice()
    return _found("libdevice", path, "fail", missing, "pip install nvidia-nvvm", detail=str)


def check_ptxas() -> Check:
    fix = "pip install nvidia-cuda-nvcc"
    path = toolchain.find_ptxas()
    if path is None:
        return Check(
            "ptxas",
            "warn",
            "not found: the driver still compiles PTX, but `--emit sass` and ahead-of-time "
            "compiles need ptxas",
            fix,
        )
    version = toolchain.tool_version(path)
    if version is None:
        return Check("ptxas", "warn", f"{path} does not run", fix)
    return Check("ptxas", "ok", f"{version}  {path}")


def _toolkit_version(root: Path) -> tuple[int, int] | None:
    """The CUDA version of a toolkit folder, from its version.json (None if it has none)."""
    try:
        data = json.loads((root / "version.json").read_text())
        major, minor = str(data["cuda"]["version"]).split(".")[:2]
        return int(major), int(minor)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_tileiras() -> Check:
    """tileiras (Tile IR -> cubin) and the libnvvm it loads; only the Tile track needs them."""
    path = toolchain.find_tileiras()
    if path is None:
        return Check(
            "tileiras",
            "warn",
            "not found (only the Tile track needs it)",
            "Tile track needs `pip install nvidia-cuda-tileiras`",
        )
    libnvvm = toolchain.find_libnvvm()
    if libnvvm is None:
        return Check("tileiras", "warn", f"{path}, but no libnvvm", "pip install nvidia-nvvm")
    version = toolchain.tool_version(path) or "unknown version"
    home = config.cuda_home()
    if home:
        # tileiras prefers $CUDA_HOME/nvvm/lib64/libnvvm.so; an old one fails with exit 5.
        cuda = _toolkit_version(Path(home))
        if cuda is not None and cuda < MIN_TILEIRAS_CUDA:
            wheels = toolchain.cuda_root_of_wheels()
            return Check(
                "tileiras",
                "warn",
                f"{version}, but CUDA_HOME={home} is CUDA {cuda[0]}.{cuda[1]} (< 13.1): "
                "tileiras would load its old libnvvm and fail",
                f"export CUDA_HOME={wheels}" if wheels else "point CUDA_HOME at CUDA 13.1+",
            )
    return Check("tileiras", "ok", f"{version}  {path} (libnvvm {libnvvm})")


def check_disassembler() -> Check:
    """nvdisasm or cuobjdump: only `fearless inspect --emit sass` needs one."""
    from ..backends.sass import DISASSEMBLER_FIX

    missing = "neither nvdisasm nor cuobjdump found (only `inspect --emit sass` needs one)"
    path = toolchain.find_sass_disassembler()
    return _found("nvdisasm", path, "warn", missing, DISASSEMBLER_FIX)


def check_cuda_tile() -> Check:
    """The cuda-tile package: the Tile track's bytecode encoders (backends/tileir/cuda_tile.py)."""
    fix = "the Tile track needs `pip install 'cuda-tile>=1.7,<1.9'`"
    version = _version("cuda-tile")
    if version is None:
        return Check("cuda-tile", "warn", "not installed (only the Tile track needs it)", fix)
    try:
        importlib.import_module("cuda.tile")
    except Exception as exc:
        return Check("cuda-tile", "warn", f"{version}, but cannot import cuda.tile: {exc}", fix)
    return Check("cuda-tile", "ok", version)


def _check_dist(name: str, module: str, minimum: str) -> Check:
    fix = f"pip install '{name}>={minimum}'"
    try:
        importlib.import_module(module)
    except Exception as exc:
        return Check(name, "fail", f"cannot import {module}: {exc}", fix)
    return Check(name, "ok", _version(name) or "installed (version unknown)")


def check_cuda_core() -> Check:
    return _check_dist("cuda-core", "cuda.core", "0.3")


def check_cuda_bindings() -> Check:
    return _check_dist("cuda-bindings", "cuda.bindings.driver", "12.8")


@dataclass(frozen=True)
class GpuProbe:
    """What the CUDA driver says about this machine; `error` says why there is no usable GPU."""

    driver: str | None = None
    name: str | None = None
    compute_capability: tuple[int, int] | None = None
    error: str | None = None
    count: int = 1  # the GPUs this process sees

    @property
    def usable(self) -> bool:
        return self.name is not None and self.error is None

    @property
    def arch(self) -> str | None:
        cc = self.compute_capability
        return f"sm_{cc[0]}{cc[1]}" if cc else None


def _driver_version() -> tuple[str | None, str | None]:
    """(CUDA version the driver supports, e.g. "13.0", or None; why not)."""
    try:
        driver: Any = importlib.import_module("cuda.bindings.driver")
        err, version = driver.cuDriverGetVersion()
    except Exception as exc:  # DynamicLibNotFoundError when libcuda.so is absent
        return None, f"{type(exc).__name__}: {exc}"
    if int(err) != 0:
        return None, f"cuDriverGetVersion failed: {err}"
    return f"{version // 1000}.{version % 1000 // 10}", None


def probe_gpu() -> GpuProbe:
    """Ask the driver for device 0. Never raises: no driver or no GPU comes back as `error`."""
    driver, why = _driver_version()
    if driver is None:
        return GpuProbe(error=f"no NVIDIA driver ({why})")
    try:
        core: Any = importlib.import_module("cuda.core")
        device = core.Device(0)  # by number: `Device()` asks cuCtxGetDevice, an API error
        # (compute-sanitizer reports it) while no context exists yet
        name = str(device.name)
        cc = device.compute_capability
        count = int(importlib.import_module("cuda.bindings.driver").cuDeviceGetCount()[1])
        return GpuProbe(driver, name, (int(cc[0]), int(cc[1])), count=max(count, 1))
    except Exception as exc:  # e.g. CUDA_ERROR_NO_DEVICE on a driver-only machine
        return GpuProbe(driver, error=f"no usable GPU ({type(exc).__name__}: {exc})")


def check_driver(probe: GpuProbe | None = None) -> Check:
    probe = probe or probe_gpu()
    if probe.driver is None:
        return Check(
            "driver",
            "warn",
            "no GPU: kernels run on the simulator",
            "on a machine with an NVIDIA GPU, install its driver (CUDA 12.8 or newer)",
        )
    return Check("driver", "ok", f"supports CUDA {probe.driver}")


def check_gpu(probe: GpuProbe | None = None) -> Check:
    probe = probe or probe_gpu()
    if probe.driver is None:
        return Check("GPU", "warn", "none (no driver)")
    if not probe.usable:
        return Check(
            "GPU", "warn", f"{probe.error}: kernels run on the simulator", "check `nvidia-smi`"
        )
    detail = f"{probe.name}, compute capability {probe.arch}"
    if probe.count > 1:  # runtime/process_gpu.py: one GPU per process, chosen by the first call
        detail += (
            f" (GPU 0 of {probe.count}; a process runs on the GPU it is given first, or on "
            "torch's current device: fl.set_device(i) or torch.cuda.set_device(i))"
        )
    return Check("GPU", "ok", detail)


def check_target(probe: GpuProbe | None = None) -> Check:
    """Which target `fl.get_target()` picks: FEARLESS_TARGET, else cuda when a GPU is usable."""
    try:
        config.sim_devices()
    except ValueError as exc:
        return Check(
            "target", "warn", str(exc), "set FEARLESS_SIM_DEVICES to 2 or more, or unset it"
        )
    override = config.target_override()
    if override is None:
        probe = probe or probe_gpu()
        if probe.usable:
            return Check("target", "ok", "cuda (GPU found)")
        return Check("target", "ok", "sim (CPU simulator: no usable GPU)" + _sim_devices())
    if override not in ("cuda", "sim"):
        return Check(
            "target",
            "fail",
            f"FEARLESS_TARGET={override!r} is not a target",
            "set FEARLESS_TARGET to `cuda` or `sim`, or unset it",
        )
    if override == "cuda" and not (probe or probe_gpu()).usable:
        return Check(
            "target",
            "warn",
            "cuda (FEARLESS_TARGET), but there is no usable GPU: launches will fail",
            "unset FEARLESS_TARGET or set it to `sim`",
        )
    devices = _sim_devices() if override == "sim" else ""
    return Check("target", "ok", f"{override} (from FEARLESS_TARGET){devices}")


def check_arch() -> Check | None:
    """FEARLESS_ARCH, when set: an arch fearless compiles for (None when unset: the GPU's)."""
    from .compile import ARCHES

    arch = config.arch_override()
    if arch is None:
        return None
    if arch not in ARCHES:
        return Check(
            "arch",
            "fail",
            f"FEARLESS_ARCH={arch!r} is not an arch fearless compiles for",
            f"set FEARLESS_ARCH to one of {', '.join(ARCHES)}, or unset it (the GPU's arch)",
        )
    return Check("arch", "ok", f"{arch} (from FEARLESS_ARCH)")


def _sim_devices() -> str:
    """The simulator's pretend devices, when FEARLESS_SIM_DEVICES asks for more than one."""
    n = config.sim_devices()
    return f", {n} pretend devices (FEARLESS_SIM_DEVICES)" if n > 1 else ""


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_cache_dir() -> Check:
    path = config.cache_dir()
    if config.cache_disabled():
        return Check("cache", "ok", f"disk cache off (FEARLESS_NO_DISK_CACHE), would be {path}")
    fix = "set FEARLESS_CACHE_DIR to a writable folder, or FEARLESS_NO_DISK_CACHE=1"
    existing = _nearest_existing(path)
    if existing.exists() and not existing.is_dir():
        return Check("cache", "fail", f"{existing} is a file, not a folder", fix)
    if not os.access(existing, os.W_OK | os.X_OK):
        return Check("cache", "fail", f"{path} is not writable", fix)
    state = "writable" if existing == path else "will be created"
    return Check("cache", "ok", f"{path} ({state})")


def check_torch() -> Check:
    # Metadata only: importing torch takes seconds and may initialise CUDA.
    version = _version("torch")
    if version is None:
        return Check("torch", "warn", "not installed (optional: only for torch tensors)")
    return Check("torch", "ok", f"{version} (optional)")


def check_transformers(version: str | None = None) -> Check:
    """Hugging Face transformers, for fearless.transformers (optional; metadata only): before 5
    the dense models patch, but `moe=` swaps 5's stacked `...Experts` modules."""
    version = version if version is not None else _version("transformers")
    if version is None:
        return Check("transformers", "ok", "not installed (optional: fearless.transformers)")
    major = int(version.split(".")[0]) if version.split(".")[0].isdigit() else 0
    if major < 5:
        return Check(
            "transformers",
            "warn",
            f"{version}: the dense models patch; `moe=` (the experts of Qwen3-MoE, "
            "Qwen2-MoE, GLM-4-MoE, Mixtral, OLMoE, DeepSeek, Qwen3-Next, Qwen3.5) needs transformers 5",
            "pip install -U 'transformers>=5'",
        )
    return Check("transformers", "ok", f"{version} (optional)")


def run_checks() -> list[Check]:
    """Every check, in report order; the GPU is probed once and shared."""
    probe = probe_gpu()
    plain: list[Callable[[], Check]] = [
        check_python,
        check_numpy,
        check_llvmlite,
        check_libdevice,
        check_ptxas,
        check_disassembler,
        check_tileiras,
        check_cuda_tile,
        check_cuda_core,
        check_cuda_bindings,
    ]
    checks = [check() for check in plain]
    checks += [check_driver(probe), check_gpu(probe), check_target(probe)]
    checks += [arch for arch in (check_arch(),) if arch is not None]
    checks += [check_cache_dir(), check_torch(), check_transformers()]
    return checks


def summary(checks: list[Check]) -> str:
    counts = {s: sum(c.status == s for c in checks) for s in ("ok", "warn", "fail")}
    warnings, problems = counts["warn"], counts["fail"]
    text = (
        f"{counts['ok']} ok, {warnings} warning{'' if warnings == 1 else 's'}, "
        f"{problems} problem{'' if problems == 1 else 's'}"
    )
    if counts["fail"]:
        return f"{text}: fix the ✗ lines above before using fearless."
    return f"{text}: fearless is ready."


HELP = "check the toolchain, driver and GPU; print the fix for anything missing"


def run(args: argparse.Namespace) -> int:
    print(f"fearless doctor (fearless {fearless_version()})")
    checks = run_checks()
    for check in checks:
        print(check.render())
    print()
    print(summary(checks))
    return 1 if any(c.status == "fail" for c in checks) else 0
