"""What the numbers were measured on: GPU, driver, clocks, and the versions of every package.

Read once at the start of a run (clocks again at the end: a card that throttled shows it).
Nothing here changes the GPU's settings; `nvidia-smi` is only queried.
"""

from __future__ import annotations

import importlib.metadata
import platform
import shutil
import subprocess
import sys
from typing import Any

PACKAGES = (
    "fearless",
    "torch",
    "triton",
    "cuda-tile",
    "tilegym",
    "cupy-cuda13x",
    "cuda-core",
    "cuda-bindings",
    "nvidia-cuda-nvrtc",
    "nvidia-cuda-tileiras",
    "llvmlite",
    "numpy",
    "matplotlib",
)

SMI_FIELDS = (
    "name",
    "driver_version",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "clocks.max.mem",
    "power.draw",
    "power.limit",
    "temperature.gpu",
    "persistence_mode",
)


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def nvidia_smi() -> dict[str, str] | str:
    """The SMI_FIELDS of GPU 0 from `nvidia-smi`, or why they could not be read."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "nvidia-smi not found"
    try:
        res = subprocess.run(
            [smi, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi failed: {exc}"
    if res.returncode != 0:
        return f"nvidia-smi exit {res.returncode}: {res.stderr.strip()[:200]}"
    values = [v.strip() for v in res.stdout.strip().splitlines()[0].split(",")]
    return dict(zip(SMI_FIELDS, values, strict=False))


def gpu_info(torch: Any | None) -> dict[str, Any]:
    """Device properties through torch and the driver version through cuda.bindings."""
    info: dict[str, Any] = {}
    if torch is not None and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(
            name=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            memory_gib=round(props.total_memory / 2**30, 1),
            l2_mib=round(getattr(props, "L2_cache_size", 0) / 2**20, 1) or None,
            torch_cuda=torch.version.cuda,
        )
    try:
        from cuda.bindings import driver

        err, version = driver.cuDriverGetVersion()
        if not err:
            info["driver_cuda_version"] = f"{version // 1000}.{version % 1000 // 10}"
    except Exception as exc:
        info["driver_cuda_version"] = f"unknown ({type(exc).__name__})"
    return info


def machine_record(torch: Any | None) -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "gpu": gpu_info(torch),
        "nvidia_smi": nvidia_smi(),
        "packages": package_versions(),
    }
