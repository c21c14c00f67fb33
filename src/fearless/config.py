"""Every environment knob of fearless, typed and documented, read here and nowhere else.

Values are read when asked for (never at import time), so tests can scope them with
`monkeypatch.setenv`. `set_target` overrides `FEARLESS_TARGET` for the process.

Every yes-or-no knob reads the same way (`flag`): 1/true/yes/on are on and 0/false/no/off are
off, in any case; unset or empty is the knob's default; anything else warns once, naming the
variable and the values it takes, and counts as the default.
"""

from __future__ import annotations

import functools
import itertools
import os
import warnings
from pathlib import Path
from typing import Any

from .errors import FearlessWarning
from .frames import user_stacklevel

ON_WORDS = ("1", "true", "yes", "on")
OFF_WORDS = ("0", "false", "no", "off")


def flag(name: str, default: bool) -> bool:
    """The yes-or-no knob `name` (see the module docstring); `default` where it is unset."""
    return _read_flag(name, os.environ.get(name), default)


@functools.lru_cache(maxsize=256)
def _read_flag(name: str, raw: str | None, default: bool) -> bool:
    """`raw`, the value of `name`, as a yes or no (cached: a bad value warns once)."""
    value = (raw or "").strip().lower()
    if not value:
        return default
    if value in ON_WORDS:
        return True
    if value in OFF_WORDS:
        return False
    warnings.warn(
        f"{name}={raw!r} is neither on ({'/'.join(ON_WORDS)}) nor off ({'/'.join(OFF_WORDS)}); "
        f"fearless reads it as its default, {'on' if default else 'off'}",
        FearlessWarning,
        stacklevel=user_stacklevel(),
    )
    return default


def _spellings(words: tuple[str, ...]) -> frozenset[Any]:
    """Every upper/lower-case spelling of `words`, as str and as os.environ's bytes."""
    out: set[Any] = set()
    for word in words:
        for letters in itertools.product(*({c.lower(), c.upper()} for c in word)):
            out.update(("".join(letters), "".join(letters).encode()))
    return frozenset(out)


_target_override: str | None = None


def target_override() -> str | None:
    """The target set by `fl.set_target`, else `FEARLESS_TARGET` ("cuda" or "sim"), else None."""
    if _target_override is not None:
        return _target_override
    raw = _environ_bytes.get(b"FEARLESS_TARGET") if _environ_bytes is not None else None
    if raw is None and _environ_bytes is not None:
        return None  # every launch asks: the common case skips os.environ's key encoding
    value = os.environ.get("FEARLESS_TARGET", "").strip().lower()
    return value or None


# os.environ's own store on POSIX (bytes keys; `monkeypatch.setenv` writes through to it)
_store = getattr(os.environ, "_data", None)
_environ_bytes: dict[bytes, bytes] | None = (
    _store if os.name == "posix" and isinstance(_store, dict) else None
)


def target_env_raw() -> Any:
    """FEARLESS_TARGET as os.environ stores it (None when unset): the same object until the
    variable is set again, so a launcher may test it by identity (simt/api.py's warm path)."""
    if _environ_bytes is not None:
        return _environ_bytes.get(b"FEARLESS_TARGET")
    return os.environ.get("FEARLESS_TARGET")


def c_compiler() -> str | None:
    """`CC`, the C compiler the launcher extension is built with (None: look on PATH)."""
    return os.environ.get("CC") or None


def raw(name: str) -> str:
    """The variable as set (empty when unset), for messages that quote it."""
    return os.environ.get(name, "")


def _seconds(name: str, default: float) -> float:
    """The variable `name` as a number of seconds; `default` when unset or not a number (with
    a warning that quotes it)."""
    value = os.environ.get(name, "").strip()
    try:
        return float(value) if value else default
    except ValueError:
        warnings.warn(f"{name}={value!r} is not a number of seconds; using {default}", stacklevel=3)
        return default


def bench_ops_budget(default: float) -> float:
    """FEARLESS_BENCH_OPS_BUDGET_S: seconds `fearless bench` gives the ops family."""
    return _seconds("FEARLESS_BENCH_OPS_BUDGET_S", default)


def bench_models_budget(default: float) -> float:
    """FEARLESS_BENCH_MODELS_BUDGET_S: seconds after which `fearless bench`'s models family
    starts no more probes."""
    return _seconds("FEARLESS_BENCH_MODELS_BUDGET_S", default)


def child_environment(**changes: str) -> dict[str, str]:
    """This process's environment with `changes`, for a tool fearless starts (tileiras, a
    bench worker)."""
    return {**os.environ, **changes}


def set_target_override(target: str | None) -> None:
    global _target_override
    _target_override = target


def cache_dir() -> Path:
    """FEARLESS_CACHE_DIR: the on-disk compile cache (default ~/.cache/fearless)."""
    value = os.environ.get("FEARLESS_CACHE_DIR")
    if value:
        return Path(value).expanduser()
    return Path.home() / ".cache" / "fearless"


def cache_disabled() -> bool:
    """FEARLESS_NO_DISK_CACHE=1 keeps compiled kernels in memory only."""
    return flag("FEARLESS_NO_DISK_CACHE", False)


def dump_stages() -> frozenset[str]:
    """FEARLESS_DUMP=ir,llvm,ptx,tileir: the stages written to `dump_dir()` on every compile."""
    value = os.environ.get("FEARLESS_DUMP", "")
    return frozenset(s.strip().lower() for s in value.split(",") if s.strip())


def dump_dir() -> Path:
    """FEARLESS_DUMP_DIR: where dumped stages go (default ./fearless_dump)."""
    return Path(os.environ.get("FEARLESS_DUMP_DIR", "fearless_dump"))


def sync_after_launch() -> bool:
    """FEARLESS_SYNC=1: synchronise after every launch and raise device errors at once.

    Asked on every launch, so it reads `os.environ`'s backing dict with the key encoded once:
    `os.environ.get` re-encodes the key on each call (0.5 us, a tenth of a launch). A value that
    is on (`SYNC_ON`) costs one set lookup; any other value is read by `flag`, so it warns as
    every knob does.
    """
    raw = getattr(os.environ, "_data", None)
    if raw is None or _SYNC_KEY is None:
        return flag("FEARLESS_SYNC", False)
    value = raw.get(_SYNC_KEY)
    if value is None or value in SYNC_ON:
        return value is not None
    return flag("FEARLESS_SYNC", False)


_encodekey = getattr(os.environ, "encodekey", None)
_SYNC_KEY = _encodekey("FEARLESS_SYNC") if _encodekey is not None else None
# the values of FEARLESS_SYNC that mean "yes" (ON_WORDS in any case), as os.environ stores them
SYNC_ON: frozenset[Any] = _spellings(ON_WORDS)


def sync_store() -> tuple[dict[Any, Any], Any] | None:
    """(os.environ's backing dict, FEARLESS_SYNC's key in it), for launchers that test
    `store.get(key) in SYNC_ON` inline (claunch_prepared.c's `sync_wanted` is the same test);
    None where there is no such dict (then call `sync_after_launch`). A launcher built while
    FEARLESS_SYNC holds a value that is neither on nor off warns about it here."""
    raw = getattr(os.environ, "_data", None)
    if not isinstance(raw, dict) or _SYNC_KEY is None:
        return None
    flag("FEARLESS_SYNC", False)  # the warning, if the value is not a yes or no
    return raw, _SYNC_KEY


def arch_override() -> str | None:
    """FEARLESS_ARCH=sm_80|sm_90|sm_90a: the arch to compile for instead of the device's."""
    value = os.environ.get("FEARLESS_ARCH", "").strip()
    return value or None


def verify_each_pass() -> bool:
    """FEARLESS_VERIFY=1 (set by the test suite): run the IR verifier after every pass."""
    return flag("FEARLESS_VERIFY", False)


def show_internal_frames() -> bool:
    """FEARLESS_TRACEBACK=1: keep compiler frames in tracebacks (for fearless developers)."""
    return flag("FEARLESS_TRACEBACK", False)


def cuda_home() -> str | None:
    """CUDA_HOME / CUDA_PATH, as tileiras and ptxas lookups see it."""
    return os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")


def sim_max_threads() -> int:
    """FEARLESS_SIM_MAX_THREADS: the most threads one SIMT launch may have on the simulator
    (default 2**26 = 67,108,864, seconds to minutes of simulation); a larger launch is refused
    before it runs. A value that is not a positive whole number raises ValueError."""
    value = os.environ.get("FEARLESS_SIM_MAX_THREADS", "").strip().replace("_", "")
    if not value:
        return 1 << 26
    return _positive_int("FEARLESS_SIM_MAX_THREADS", value, 1 << 80)  # past any launch's count


def sim_co_resident_blocks() -> int | None:
    """FEARLESS_SIM_CO_RESIDENT_BLOCKS: the most blocks a cooperative launch (a kernel with
    `simt.cg.this_grid().sync()`) may have on the simulator, in place of the pretend H200's
    occupancy (`runtime/cooperative.py`); None when unset. A value that is not a positive whole
    number raises ValueError."""
    value = os.environ.get("FEARLESS_SIM_CO_RESIDENT_BLOCKS", "").strip().replace("_", "")
    if not value:
        return None
    return _positive_int("FEARLESS_SIM_CO_RESIDENT_BLOCKS", value, 1 << 80)  # past any grid's


def sim_devices() -> int:
    """FEARLESS_SIM_DEVICES: how many devices the simulator pretends to have (default 1), so
    that the CPU tests cover multi-device dispatch (`fl.empty(..., device=1)`, one launch's
    arguments on one device). A value that is not a positive whole number raises ValueError."""
    value = os.environ.get("FEARLESS_SIM_DEVICES", "").strip()
    if not value:
        return 1
    return _positive_int("FEARLESS_SIM_DEVICES", value, SIM_DEVICES_MAX)


SIM_DEVICES_MAX = 1024  # FEARLESS_SIM_DEVICES's largest (the test matrix needs a few)


def _positive_int(name: str, value: str, most: int) -> int:
    """`value` of variable `name` as a whole number from 1 to `most`, written in ASCII digits
    (`str.isdigit` also takes '²' and '٢'); else ValueError naming the variable."""
    digits = value.lstrip("0")
    if not (value.isascii() and value.isdigit()) or not digits:
        raise ValueError(f"{name} must be a positive whole number, not {value!r}")
    if len(digits) > len(str(most)) or int(digits) > most:  # no int() of a huge string
        raise ValueError(f"{name} must be at most {most:,}, not {value!r}")
    return int(digits)


def compiled_launcher_enabled() -> bool:
    """FEARLESS_CLAUNCH=0: SIMT warm launches stay on the pure-Python launcher instead of the
    compiled one (runtime/claunch.py)."""
    return flag("FEARLESS_CLAUNCH", True)


def autotune_enabled() -> bool:
    """FEARLESS_AUTOTUNE=0 (or false/no/off): `fl.autotune` takes each function's first
    configuration, untimed."""
    return flag("FEARLESS_AUTOTUNE", True)


def autotune_full() -> bool:
    """FEARLESS_AUTOTUNE_FULL=1: a key the tuning tables lack times every configuration, even
    where the tables hold the function at other sizes (whose winners alone are timed by
    default, `autotune_session.NEAR` of them)."""
    return flag("FEARLESS_AUTOTUNE_FULL", False)


def tuning_tables() -> list[Path]:
    """FEARLESS_TUNING_TABLE=path[:path...]: tuning tables (`autotune_tables.py`) `fl.autotune`
    reads before the shipped ones, earlier paths first; a folder stands for its `*.json` files.
    Empty parts are skipped."""
    value = os.environ.get("FEARLESS_TUNING_TABLE", "")
    return [Path(p).expanduser() for p in value.split(os.pathsep) if p.strip()]
