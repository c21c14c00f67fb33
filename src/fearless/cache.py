"""Content-addressed compile cache on disk (FEARLESS_CACHE_DIR, default ~/.cache/fearless).

Entries are pickled compiled kernels named by the sha256 key the compiler computes (source,
resolved globals, options, versions, arch). Writes are atomic: write a temporary file in the
same directory, then rename. A corrupt or unreadable entry is a miss, never an error.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

from . import config

_FORMAT = "v1"


def _path(key: str) -> Path:
    return config.cache_dir() / _FORMAT / key[:2] / f"{key}.pkl"


def load(key: str) -> Any | None:
    if config.cache_disabled():
        return None
    try:
        with _path(key).open("rb") as f:
            return pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None


def store(key: str, value: Any) -> None:
    if config.cache_disabled():
        return
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        tmp = Path(name)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            tmp.unlink()
