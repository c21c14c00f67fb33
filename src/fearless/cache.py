"""Content-addressed compile cache on disk (FEARLESS_CACHE_DIR, default ~/.cache/fearless).

Entries are compiled kernels named by the sha256 key the compiler computes (source, resolved
globals, options, versions, arch), under a folder named for the on-disk format (`FORMAT`).
An entry file is a header and the pickled kernel:

    fearless-cache v2\\n
    <key>\\n
    <sha256 hex of "<key>\\n" + the pickle>\\n
    <the pickle>

`load` trusts an entry only when its header is this format's, its checksum matches and the key
inside it is the key asked for (an entry copied or renamed onto another key's file is not that
kernel). Anything else, and any failure to read or unpickle it, is a miss, logged as one warning
on the "fearless.cache" logger naming the file and why; the next `store` replaces it. A missing
entry is a silent miss.

Writes are atomic: write a temporary file in the same folder, then rename. `store` says whether
it stored; a failure (an unwritable folder, a path that is a file) is logged once per cache
folder per process, and the kernel still runs, uncached. Within `stores_required()` (`fearless compile`,
whose whole point is the stored entry) a failure raises `CacheWriteError` instead.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import logging
import os
import pickle
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import config
from .errors import ToolchainError
from .version import __version__

FORMAT = "v2"
MAGIC = b"fearless-cache " + FORMAT.encode()

log = logging.getLogger("fearless.cache")

_required: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "fearless_cache_stores_required", default=False
)
_warned_folders: set[str] = set()  # the cache folders a store failed in, logged once each


class CacheWriteError(ToolchainError):
    """A compiled kernel could not be stored in the disk cache (raised within
    `stores_required()` only; elsewhere the kernel runs uncached)."""


# What each track's compiler is made of (files and folders of the package): the digest of
# their source stands for the fearless version in the cache keys and the tuned winners' names.
SIMT_COMPILER = ("abi.py", "dtypes.py", "math.py", "frontend", "ir", "simt", "backends")
TILE_COMPILER = ("abi.py", "dtypes.py", "math.py", "frontend", "ir", "tile", "backends")


@functools.cache
def source_digest(*parts: str) -> str:
    """sha256 of fearless's own source under `parts` (files or folders of the package, paths
    and bytes): a compiler whose source changed never reuses what an older one stored, also
    between two builds of one version."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for part in parts:
        path = root / part
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            h.update(f.relative_to(root).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def path_of(key: str) -> Path:
    """The entry file of `key`."""
    return config.cache_dir() / FORMAT / key[:2] / f"{key}.pkl"


def encode(key: str, payload: bytes) -> bytes:
    """An entry file's bytes: the header (format, key, checksum) and the pickled kernel."""
    return b"\n".join([MAGIC, key.encode(), _checksum(key, payload).encode(), payload])


def _checksum(key: str, payload: bytes) -> str:
    return hashlib.sha256(key.encode() + b"\n" + payload).hexdigest()


class _Rejected(Exception):
    """Why an entry file is not served (logged by `load`)."""


def load(key: str) -> Any | None:
    """The kernel stored under `key`, or None: no entry, or one that fails the checks."""
    if config.cache_disabled():
        return None
    path = path_of(key)
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None  # never stored (or the cache folder is not one: `store` says so)
    except (OSError, MemoryError) as exc:  # MemoryError: a huge file
        why = f"cannot read it: {_why(exc)}"
    else:
        try:
            return _unpack(key, data)
        except _Rejected as rejected:
            why = str(rejected)
    log.warning("ignoring compile cache entry %s: %s", path, why)
    return None


def _unpack(key: str, data: bytes) -> Any:
    """The kernel in an entry file's bytes, checked; raises `_Rejected` saying why not."""
    parts = data.split(b"\n", 3)
    if len(parts) != 4 or parts[0] != MAGIC:
        raise _Rejected(f"not a fearless cache entry of format {FORMAT}")
    stored_key, digest, payload = parts[1], parts[2], parts[3]
    if digest != _checksum(stored_key.decode(errors="replace"), payload).encode():
        raise _Rejected("checksum mismatch: the file was changed or damaged")
    if stored_key != key.encode():
        other = stored_key.decode(errors="replace")
        raise _Rejected(f"it holds the entry of another key ({other}), not {key}")
    try:
        return pickle.loads(payload)
    except Exception as exc:  # any failure to unpickle (a class gone, a bad opcode...) is a miss
        raise _Rejected(f"cannot unpickle it: {type(exc).__name__}: {exc}") from None


def store(key: str, value: Any) -> bool:
    """Store `value` under `key`; whether it was stored. A failure is logged (once per cache
    folder), or raises `CacheWriteError` within `stores_required()`."""
    if config.cache_disabled():
        return False
    path = path_of(key)
    try:
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # an unpicklable kernel: run it, uncached
        return _store_failed(path, f"cannot pickle it: {type(exc).__name__}: {exc}")
    tmp: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        tmp = Path(name)
        with os.fdopen(fd, "wb") as f:
            f.write(encode(key, payload))
        tmp.replace(path)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()
        return _store_failed(path, _why(exc))
    return True


def built_here(track: str) -> bool:
    """Whether this cache holds a kernel this fearless version compiled on `track` ("tile",
    "simt"): then a process's first calls are mostly disk-cache hits, which the toolchain
    warm-up (runtime/warmup.py) would only slow down."""
    if config.cache_disabled():
        return False
    try:
        return _built_marker(track).exists()
    except OSError:
        return False


def mark_built(track: str) -> None:
    """Record that a kernel of `track` was compiled into this cache (see `built_here`); a
    failure to write is left to `store`, which reports it."""
    if config.cache_disabled():
        return
    with contextlib.suppress(OSError):
        marker = _built_marker(track)
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()


def _built_marker(track: str) -> Path:
    return config.cache_dir() / FORMAT / f"built-{track}-{__version__}"


def _store_failed(path: Path, why: str) -> bool:
    folder = config.cache_dir()
    if _required.get():
        raise CacheWriteError(
            f"cannot store compiled kernels in the cache folder {folder}: {why}",
            help="set FEARLESS_CACHE_DIR to a folder you can write to "
            "(unset, it is ~/.cache/fearless)",
        )
    if str(folder) not in _warned_folders:
        _warned_folders.add(str(folder))
        log.warning(
            "cannot store compiled kernels in the cache folder %s (%s): %s; "
            "kernels run but are compiled again in every process",
            folder,
            path,
            why,
        )
    return False


@contextlib.contextmanager
def stores_required() -> Iterator[None]:
    """Within: a `store` that fails raises `CacheWriteError` (`fearless compile`)."""
    token = _required.set(True)
    try:
        yield
    finally:
        _required.reset(token)


def _why(exc: BaseException) -> str:
    """An OS error as `strerror: 'path'` (what failed, where), or which file is in the way of a
    folder; others as their type and text."""
    if isinstance(exc, NotADirectoryError | FileExistsError) and exc.filename:
        path = Path(os.fsdecode(exc.filename))
        blocker = next((p for p in (path, *path.parents) if p.is_file()), None)
        if blocker is not None:
            return f"{blocker} is a file, not a folder"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: '{exc.filename}'" if exc.filename else exc.strerror
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
