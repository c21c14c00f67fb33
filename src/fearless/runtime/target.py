"""Which target runs kernels: "cuda" (an NVIDIA GPU through the driver) or "sim" (the CPU simulator).

The choice is `fl.set_target`, else `FEARLESS_TARGET`, else "cuda" when a GPU and driver are
usable and "sim" otherwise. Whether CUDA is usable is probed once per process and the probe never
creates a context: it loads the driver, counts devices and reads device 0's name and compute
capability, so `fearless doctor` can say exactly why a GPU is or is not used.
"""

from __future__ import annotations

import enum
import threading
from typing import Any

from .. import config
from ..errors import FearlessError, ToolchainError
from .location import user_location


class Target(str, enum.Enum):
    """Where launches run. A member is an object the code asks (`target.on_device`,
    `target.simulated`) instead of comparing names; it still equals its name (`"cuda"`,
    `"sim"`), the spelling of `fl.set_target` and FEARLESS_TARGET."""

    CUDA = "cuda"
    SIM = "sim"

    # (compared by value: reading a member through its class costs a descriptor call, and
    # every launch asks)
    @property
    def on_device(self) -> bool:
        """Whether kernel arguments live in GPU memory."""
        return self._value_ == "cuda"

    @property
    def simulated(self) -> bool:
        """Whether the CPU simulator runs the kernels."""
        return self._value_ == "sim"

    def __str__(self) -> str:
        return self.value


TARGETS: tuple[Target, ...] = tuple(Target)

# Compile for this arch when no GPU says otherwise (the H200 class the project measures on).
FALLBACK_ARCH = "sm_90"


class TargetError(FearlessError, ValueError, code="E0900"):
    """An unknown target name (in `fl.set_target` or FEARLESS_TARGET)."""


_probe: tuple[bool, str, str | None] | None = None  # (usable, reason, arch of device 0)
# One probe at a time: a kernel's definition starts a warm-up thread that probes (runtime/
# warmup.py) while the main thread's first GPU call may probe too, and two threads importing
# cuda.core at once could leave one of them a half-imported module ("cannot import name
# 'Device' from 'cuda.core.cu13'", seen once in two GPU runs of tests/gpu/test_devices_gpu.py).
_probe_lock = threading.Lock()


def cuda_status() -> tuple[bool, str]:
    """Whether a GPU and driver are usable, with the reason in words (for `fearless doctor`)."""
    usable, reason, _ = _probe_once()
    return usable, reason


def current_target() -> Target:
    """The target launches run on now: the override, else CUDA when a GPU is usable, else SIM.
    Every launch asks, so the common answer (no override, no FEARLESS_TARGET, the GPU probed)
    is read inline from config's fields, without a call."""
    env = config._environ_bytes
    probe = _probe
    if (
        config._target_override is None
        and probe
        and env is not None
        and b"FEARLESS_TARGET" not in env
    ):
        return _CUDA if probe[0] else _SIM
    override = config.target_override()
    if override is None:
        probe = _probe or _probe_once()
        return _CUDA if probe[0] else _SIM
    target = _BY_NAME.get(override) or _validate(override, source="FEARLESS_TARGET")
    if target is _CUDA and not (_probe or _probe_once())[0]:
        _require_cuda()
    return target


# (an enum member read through its class costs a descriptor call: these are plain globals)
_CUDA, _SIM = Target.CUDA, Target.SIM
_BY_NAME = {t.value: t for t in Target}  # the names `set_target` stores


# The name the rest of the package and the public API (`fl.get_target()`) use.
get_target = current_target


def set_target(name: str | None) -> None:
    """Pick the target for this process ("cuda" or "sim"); None goes back to the default."""
    if name is None:
        config.set_target_override(None)
        return
    target = _validate(name, source="set_target")
    if target.on_device:
        _require_cuda()
    config.set_target_override(target.value)


def default_arch() -> str:
    """The arch to compile for: FEARLESS_ARCH, else device 0's ("sm_90"), else sm_90."""
    override = config.arch_override()
    if override:
        return override
    return _probe_once()[2] or FALLBACK_ARCH


def _validate(name: str, source: str) -> Target:
    value = name.strip().lower() if isinstance(name, str) else name
    if isinstance(value, str) and value in TARGETS:
        return Target(value)
    where = f"FEARLESS_TARGET={name!r}" if source == "FEARLESS_TARGET" else f"{name!r}"
    raise TargetError(
        f"unknown target {where}",
        None if source == "FEARLESS_TARGET" else user_location(),
        help='the targets are "cuda" (the GPU) and "sim" (the CPU simulator)',
    )


def _require_cuda() -> None:
    usable, reason, _ = _probe_once()
    if not usable:
        raise ToolchainError(
            f"the cuda target is not usable: {reason}",
            help='run `fearless doctor` for details, or use the simulator: fl.set_target("sim")',
        )


def _probe_once() -> tuple[bool, str, str | None]:
    global _probe
    if _probe is None:
        with _probe_lock:
            if _probe is None:
                _probe = _probe_cuda()
    return _probe


def _probe_cuda() -> tuple[bool, str, str | None]:
    """Load the driver and look at device 0 without creating a context."""
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        return False, f"cuda-bindings is not importable ({exc}); pip install cuda-bindings", None
    try:
        (err,) = driver.cuInit(0)
    except Exception as exc:  # cuda.pathfinder's DynamicLibNotFoundError: no libcuda.so
        return False, f"no NVIDIA driver: {_first_line(exc)}", None
    if err:
        return False, f"the driver did not initialise: {result_text(driver, err)}", None
    try:
        err, count = driver.cuDeviceGetCount()
        if err or count == 0:
            why = result_text(driver, err) if err else "no CUDA device is visible"
            return False, why, None
        _, version = driver.cuDriverGetVersion()
        _, dev = driver.cuDeviceGet(0)
        _, raw_name = driver.cuDeviceGetName(256, dev)
        attr = driver.CUdevice_attribute
        _, major = driver.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev
        )
        _, minor = driver.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev
        )
    except Exception as exc:
        return False, f"querying the GPU failed: {_first_line(exc)}", None
    try:
        import cuda.core  # noqa: F401 - the runtime allocates and makes streams through it
    except ImportError as exc:
        return False, f"cuda-core is not importable ({exc}); pip install cuda-core", None
    name = bytes(raw_name).split(b"\0", 1)[0].decode(errors="replace")
    arch = f"sm_{major}{minor}"
    reason = (
        f"{name} ({arch}), driver for CUDA {version // 1000}.{version % 1000 // 10}, "
        f"{count} device{'s' if count != 1 else ''}"
    )
    return True, reason, arch


def result_text(driver: Any, err: Any) -> str:
    """A CUresult as "CUDA_ERROR_X (the driver's sentence)"; `driver` is cuda.bindings.driver."""
    try:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        return f"{name.decode()} ({text.decode()})"
    except Exception:
        return f"CUresult {int(err)}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
