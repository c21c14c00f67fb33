"""Where `fl.autotune` keeps its winners on disk, one small JSON file per (function, key, device):
`config.cache_dir()/autotune/v1/<sha256>.json`, written atomically.

The files are read back as untrusted input: anything but a well-formed entry that names one of
the configurations (a truncated write, a disk error, a crafted file of deeply nested lists, a
file of gigabytes) is a miss, reported once per file with a `FearlessWarning`, and the function
is tuned again. Nothing read from the cache can raise out of `load`.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import cache, config
from .errors import FearlessWarning
from .frames import user_stacklevel

MAX_ENTRY_BYTES = 1 << 20  # an entry is a few hundred bytes; a larger file is not ours
_warned: set[Path] = set()


def entry_path(
    fn: Callable[..., Any],
    name: str,
    key: Hashable,
    device: str,
    configs: Sequence[Mapping[str, Any]],
) -> Path:
    """The file of `fn`'s winner for `key` on `device`: named by the function's module, name
    and source, the key, the device, the compilers' own source (for the fearless version: an
    upgrade that left both compilers alone keeps every winner) and the configuration list."""
    try:
        source = inspect.getsource(getattr(fn, "func", fn))
    except (OSError, TypeError):
        source = ""
    ident = json.dumps(
        [
            getattr(fn, "__module__", ""),
            getattr(fn, "__qualname__", name),
            hashlib.sha256(source.encode()).hexdigest(),
            repr(key),
            device,
            cache.source_digest(*sorted({*cache.SIMT_COMPILER, *cache.TILE_COMPILER})),
            [sorted((k, repr(v)) for k, v in c.items()) for c in configs],
        ]
    )
    digest = hashlib.sha256(ident.encode()).hexdigest()
    return config.cache_dir() / "autotune" / "v1" / f"{digest}.json"


def load(
    path: Path, configs: Sequence[Mapping[str, Any]], name: str, *, measured_all: bool = False
) -> int | None:
    """The index of the stored winner among `configs`, or None: no entry, or one that cannot be
    used (warned about once per file); with `measured_all`, also an entry whose tuning timed
    only its tuning-table neighbours' winners (`store(..., near=True)`)."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_ENTRY_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _unusable(path, name, f"it cannot be read ({exc.strerror or exc})")
    if len(raw) > MAX_ENTRY_BYTES:
        return _unusable(path, name, f"it is over {MAX_ENTRY_BYTES} bytes")
    try:
        data = json.loads(raw)
    except RecursionError:
        return _unusable(path, name, "it nests too deeply to be an entry")
    except (ValueError, MemoryError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return _unusable(path, name, "it is not JSON")
    if measured_all and isinstance(data, dict) and data.get("near"):
        return None  # `fearless tune` measures the key over every configuration
    best = data.get("best") if isinstance(data, dict) else None
    if not isinstance(best, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in best.items()
    ):
        return _unusable(path, name, "it has no winning configuration")
    for n, cfg in enumerate(configs):
        if {k: repr(v) for k, v in cfg.items()} == best:
            return n
    return None  # a winner among other configurations (a file written by another version)


def store(
    path: Path, best: Mapping[str, Any], times: Sequence[float | None], near: bool = False
) -> None:
    """Write the winner (and every configuration's time) atomically; a disk that refuses it
    leaves the winner in memory only, and a later process tunes again. `near`: only the
    tuning-table neighbours' winners were timed (`fearless tune` does not take such an entry)."""
    data: dict[str, Any] = {"best": {k: repr(v) for k, v in best.items()}, "seconds": list(times)}
    if near:
        data["near"] = True
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        Path(tmp).replace(path)
    except OSError:
        pass


def drop(path: Path) -> None:
    """Remove an entry (its winner failed); a file already gone is fine."""
    with contextlib.suppress(OSError):
        path.unlink()


def _unusable(path: Path, name: str, why: str) -> int | None:
    """A miss (None), warned about once per file."""
    if path not in _warned:
        _warned.add(path)
        warnings.warn(
            f"fearless: the stored autotuning result for `{name}` ({path}) is unusable: {why}; "
            "tuning again",
            FearlessWarning,
            stacklevel=user_stacklevel(),
        )
    return None
