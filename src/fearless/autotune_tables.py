"""Tuning tables: winners of `fl.autotune` measured ahead of time, per (function, key, arch),
read before anything is timed, and written by `fl.autotune.export(path)` and `fearless tune`.

A table is one JSON file (docs/ops.md, "Tuning tables", has the format):

    {"format": "fearless-tuning-table", "version": 1, "entries": [
      {"function": "fearless.ops.kernels_gemm.matmul_tuned", "arch": "sm_90",
       "key": [[128, 4096, 4096], ["float16", "float16", "float16"]],
       "config": {"shape": [128, 256], "BK": 64, "occupancy": null, ...},
       "versions": {"fearless": "0.1.0", "tileiras": "13.1.0", "driver": "13.0"},
       "seconds": 0.000118}]}

`key` and `config` are the Python values as JSON (tuples as lists); an entry matches a call
when the JSON of its key is the JSON of the call's, and names the configuration whose JSON is
its `config`. Tables are read from FEARLESS_TUNING_TABLE's paths (earlier first), then the ones
the package ships (`fearless/tuning/*.json`); among the entries for one key, the first whose
versions are today's wins, else the first (stale) one.

Numbers match by value: a key or configuration `0` in a table is the function's `0.0`, as the
two are one key in Python.

Files are untrusted input, as the disk store's: a file that is not a table is skipped with one
`FearlessWarning`, a malformed entry is skipped, an entry naming a configuration the function
does not have is ignored with a warning. Nothing read from a table can raise out of `lookup`.

`write` (`fl.autotune.export`) merges into the file under an exclusive lock on `<path>.lock`
(`fcntl.flock`, where the platform has it), so processes exporting to one table at once keep
each other's entries. It refuses a file it would lose data of (`TableError`): one that is not
a table, or another version of the format, or whose "entries" is not a list; it keeps the
entries it cannot read as they are, and writes through a symbolic link to its target.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import json
import math
import os
import stat
import tempfile
import warnings
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from . import config
from .errors import FearlessError, FearlessWarning
from .frames import user_stacklevel
from .version import __version__

FORMAT = "fearless-tuning-table"
VERSION = 1
MAX_TABLE_BYTES = 64 << 20
_warned: set[Any] = set()
_cache: dict[Path, tuple[tuple[int, int], list[Entry]]] = {}  # path -> ((mtime, size), entries)
_enabled = [True]


class TableError(FearlessError, ValueError, code="E0900"):
    """`fl.autotune.export` cannot write the tuning table it was asked to (the file named)."""


@dataclass
class Entry:
    """One winner: `config` for `function`'s `key` on `arch`, measured with `versions`."""

    function: str
    arch: str
    key: Any  # the key as JSON values
    config: dict[str, Any]
    versions: dict[str, str] = field(default_factory=dict)
    seconds: float | None = None
    source: str = ""  # the file it came from

    def as_json(self) -> dict[str, Any]:
        out = {"function": self.function, "arch": self.arch, "key": self.key}
        out.update(config=self.config, versions=self.versions, seconds=self.seconds)
        return out

    def fresh(self) -> bool:
        """Whether it was measured with today's versions: fearless's, and tileiras's and the
        driver's where both the entry and this process know them."""
        now = current_versions(self.arch)
        return all(
            self.versions.get(name) == value
            for name, value in now.items()
            if name == "fearless" or name in self.versions
        )


def plain(value: Any) -> Any:
    """`value` as JSON values: tuples and lists as lists, mappings as dicts of str keys, other
    scalars as they are, anything else as its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    return repr(value)


def canonical(value: Any) -> str:
    """The JSON text two equal keys or configurations share (`value` already `plain`)."""
    return json.dumps(value, sort_keys=True)


def matching(value: Any) -> str:
    """`canonical`, with numbers by value: a float that is a whole number as the integer
    (`0.0` as `0`), so that what Python holds equal matches (`value` already `plain`)."""
    return canonical(_whole(value))


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_whole(v) for v in value]
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    return value


def table_arch() -> str:
    """The arch tables are keyed by: the device's ("sm_90"), or "sim" on the simulator."""
    from .runtime.target import current_target

    if not current_target().on_device:
        return "sim"
    from .runtime import driver

    return driver.device_info().arch


@functools.lru_cache(maxsize=8)
def current_versions(arch: str) -> dict[str, str]:
    """The versions a winner measured now is stamped with: fearless's always, tileiras's where
    its package is installed, the driver's on a GPU (`arch` other than "sim")."""
    out = {"fearless": __version__}
    with contextlib.suppress(importlib.metadata.PackageNotFoundError, ValueError):
        out["tileiras"] = importlib.metadata.version("nvidia-cuda-tileiras")
    if arch != "sim":
        driver = _driver_version()
        if driver:
            out["driver"] = driver
    return out


def _driver_version() -> str | None:
    try:
        from cuda.bindings import driver  # type: ignore[import-not-found,unused-ignore]

        err, version = driver.cuDriverGetVersion()
    except Exception:  # no driver library
        return None
    if int(err) != 0:
        return None
    return f"{version // 1000}.{version % 1000 // 10}"


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within: no table is read (`fearless tune` measures every key)."""
    _enabled.append(False)
    try:
        yield
    finally:
        _enabled.pop()


def enabled() -> bool:
    """Whether tables are read now (not inside `disabled()`)."""
    return _enabled[-1]


def table_paths() -> list[Path]:
    """The table files, in the order they are asked: FEARLESS_TUNING_TABLE's, then shipped."""
    out: list[Path] = []
    for path in config.tuning_tables():
        out.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    with contextlib.suppress(Exception):  # an installation without the folder
        shipped = resources.files("fearless").joinpath("tuning")
        out.extend(sorted(Path(str(p)) for p in shipped.iterdir() if p.name.endswith(".json")))
    return out


def entries(function: str, arch: str) -> list[Entry]:
    """Every table entry for `function` on `arch`, in the order the tables are asked."""
    if not _enabled[-1]:
        return []
    return [
        e
        for path in table_paths()
        for e in _read(path)
        if e.function == function and e.arch == arch
    ]


def lookup(function: str, arch: str, key: Hashable) -> Entry | None:
    """The entry for exactly `key`: the first with today's versions, else the first stale one."""
    want = matching(plain(key))
    found = [e for e in entries(function, arch) if matching(e.key) == want]
    return next((e for e in found if e.fresh()), found[0] if found else None)


def index_of(entry: Entry, configs: Sequence[Mapping[str, Any]], name: str) -> int | None:
    """The position of `entry`'s configuration among `configs`; None, warned about once per
    entry, when the function has no such configuration."""
    want = canonical(entry.config)
    mine = [plain(cfg) for cfg in configs]
    for n, cfg in enumerate(mine):
        if canonical(cfg) == want:
            return n
    loose = matching(entry.config)  # `{"delay": 0}` names the function's `{"delay": 0.0}`
    for n, cfg in enumerate(mine):
        if matching(cfg) == loose:
            return n
    mark = (entry.source, entry.function, canonical(entry.key), want)
    if mark not in _warned:
        _warned.add(mark)
        warnings.warn(
            f"fearless: the tuning table {entry.source} names {entry.config} for `{name}`, "
            "which is not one of its configurations; the entry is ignored",
            FearlessWarning,
            stacklevel=user_stacklevel(),
        )
    return None


def nearest(
    function: str, arch: str, key: Hashable, configs: Sequence[Mapping[str, Any]], name: str
) -> int | None:
    """The configuration of the nearest entry (`neighbours`); None: no entry of `key`'s form
    names one of `configs`."""
    near = neighbours(function, arch, key, configs, name, 1)
    return near[0] if near else None


def neighbours(
    function: str,
    arch: str,
    key: Hashable,
    configs: Sequence[Mapping[str, Any]],
    name: str,
    count: int,
    exclude_own: bool = False,
) -> list[int]:
    """The configurations of the entries nearest `key`, nearest first, up to `count` distinct
    ones: entries of the same function and arch and a key of the same form (the same strings,
    dtypes and nesting; numbers may differ), by the sum over the key's numbers of
    |log2 a - log2 b| (size classes apart); ties go to the earlier entry. Entries naming none
    of `configs` are skipped, and so are `key`'s own (`exclude_own`: the caller weighs them)."""
    mine = plain(key)
    form, numbers, own = _form(mine), _numbers(mine), matching(mine)
    ranked: list[tuple[float, int, int]] = []
    for order, entry in enumerate(entries(function, arch)):
        if _form(entry.key) != form or (exclude_own and matching(entry.key) == own):
            continue
        n = index_of(entry, configs, name)
        if n is None:
            continue
        distance = sum(_log_gap(a, b) for a, b in zip(numbers, _numbers(entry.key), strict=True))
        ranked.append((distance, order, n))
    out: list[int] = []
    for _, _, n in sorted(ranked):
        if n not in out:
            out.append(n)
            if len(out) == count:
                break
    return out


def _form(value: Any) -> str:
    """The key with every number replaced by "#"."""

    def walk(v: Any) -> Any:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return "#"
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    return canonical(walk(value))


def _numbers(value: Any) -> list[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [float(value)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v)]
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _numbers(value[k])]
    return []


def _log_gap(a: float, b: float) -> float:
    if a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b):
        return abs(math.log2(a) - math.log2(b))
    return 0.0 if a == b else 64.0


# ------------------------------------------------------------------------------ the files


def _read(path: Path) -> list[Entry]:
    """The entries of the table at `path` ([] for a file that is not one, warned once)."""
    try:
        stat = path.stat()
    except OSError:
        return _unusable(path, "it cannot be read") if path in config.tuning_tables() else []
    stamp = (stat.st_mtime_ns, stat.st_size)
    cached = _cache.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    got = _parse(path)
    _cache[path] = (stamp, got)
    return got


def _parse(path: Path) -> list[Entry]:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_TABLE_BYTES + 1)
    except OSError as exc:
        return _unusable(path, f"it cannot be read ({exc.strerror or exc})")
    if len(raw) > MAX_TABLE_BYTES:
        return _unusable(path, f"it is over {MAX_TABLE_BYTES} bytes")
    try:
        data = json.loads(raw)
    except RecursionError:
        return _unusable(path, "it nests too deeply to be a table")
    except (ValueError, MemoryError):
        return _unusable(path, "it is not JSON")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return _unusable(path, f'it has no "format": "{FORMAT}"')
    if data.get("version") != VERSION or not isinstance(data.get("entries"), list):
        return _unusable(path, f'it is not version {VERSION} with a list of "entries"')
    out, bad = [], 0
    for item in data["entries"]:
        entry = _entry(item, str(path))
        if entry is None:
            bad += 1
        else:
            out.append(entry)
    if bad:
        _unusable(path, f"{bad} of its entries are malformed and were skipped")
    return out


def _entry(item: Any, source: str) -> Entry | None:
    if not isinstance(item, dict):
        return None
    function, arch, cfg = item.get("function"), item.get("arch"), item.get("config")
    versions, seconds = item.get("versions", {}), item.get("seconds")
    if not (isinstance(function, str) and isinstance(arch, str) and isinstance(cfg, dict)):
        return None
    if "key" not in item or not isinstance(versions, dict):
        return None
    if not all(isinstance(v, str) for v in versions.values()):
        return None
    if seconds is not None and not isinstance(seconds, (int, float)):
        return None
    return Entry(function, arch, item["key"], cfg, dict(versions), seconds, source)


def _unusable(path: Path, why: str) -> list[Entry]:
    if (path, why) not in _warned:
        _warned.add((path, why))
        warnings.warn(
            f"fearless: the tuning table {path} is not used in full: {why}",
            FearlessWarning,
            stacklevel=user_stacklevel(),
        )
    return []


def write(path: Path, new: Sequence[Entry]) -> int:
    """Write `new` into the table at `path`, merged with the entries already there (a new
    entry replaces the one for the same function, arch and key; the others, those it cannot
    read too, stay as they are), atomically, under an exclusive lock on `<path>.lock`, and
    through a symbolic link to its target. Returns the number of entries the file holds. A
    file it would lose data of (not a table, another version of the format, "entries" not a
    list) is refused, not overwritten, and so is a path it cannot write: a `TableError`
    naming the file."""
    path = Path(path)
    target = Path(os.path.realpath(path))  # a link is written through, not replaced
    if target.is_dir():
        raise TableError(f"cannot write the tuning table {path}: it is a folder", help=_HELP)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TableError(f"cannot write the tuning table {path}: {_why(exc)}", help=_HELP) from None
    with _locked(target, path):
        items, extra, mode = _existing(target, path)
        slots: list[Any] = []  # each entry's JSON, in the file's order, new entries last
        where: dict[tuple[str, str, str], int] = {}
        for item in items:
            entry = _entry(item, str(target))
            if entry is None:
                slots.append(item)  # one this version cannot read: kept as it is
                continue
            ident = (entry.function, entry.arch, matching(entry.key))
            if ident in where:
                slots[where[ident]] = item
            else:
                where[ident] = len(slots)
                slots.append(item)
        for entry in new:
            ident = (entry.function, entry.arch, matching(entry.key))
            if ident in where:
                slots[where[ident]] = entry.as_json()
            else:
                where[ident] = len(slots)
                slots.append(entry.as_json())
        _replace(target, path, _text(slots, extra), mode)
    _cache.pop(target, None)
    _cache.pop(path, None)
    return len(slots)


_HELP = "export to a file you may write, e.g. `fl.autotune.export('fearless-tuning.json')`"


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


@contextlib.contextmanager
def _locked(target: Path, path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `<target>.lock` (where the platform has `fcntl`; a file
    system that refuses locks is written unlocked, as before)."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    try:
        fd = os.open(target.with_name(target.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise TableError(f"cannot write the tuning table {path}: {_why(exc)}", help=_HELP) from None
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _existing(target: Path, path: Path) -> tuple[list[Any], dict[str, Any], int]:
    """The entries (as JSON) of the table at `target`, its other top-level fields, and its
    mode bits; ([], {}, 0o644) where there is no file. A file that is not a version-1 table
    with a list of entries is a `TableError`."""
    try:
        raw = target.read_text(encoding="utf-8")
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        return [], {}, 0o644
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8
        why = _why(exc) if isinstance(exc, OSError) else str(exc)
        raise TableError(
            f"{path} exists and cannot be read as a tuning table ({why}); not overwritten",
            help=_HELP,
        ) from None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise TableError(
            f"{path} exists and is not a tuning table ({exc}); not overwritten", help=_HELP
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise TableError(
            f'{path} exists and is not a tuning table (no "format": "{FORMAT}"); not overwritten',
            help=_HELP,
        )
    if data.get("version") != VERSION:
        raise TableError(
            f"{path} is version {data.get('version')!r} of the tuning-table format, not "
            f"{VERSION}: merging would drop what this fearless does not know; not overwritten",
            help="export to another file, or with the fearless that wrote it",
        )
    if not isinstance(data.get("entries"), list):
        raise TableError(
            f'{path} is a tuning table whose "entries" is not a list; not overwritten',
            help=_HELP,
        )
    extra = {k: v for k, v in data.items() if k not in ("format", "version", "entries")}
    return data["entries"], extra, mode


def _replace(target: Path, path: Path, text: str, mode: int) -> None:
    """Write `text` to `target` atomically (a temporary file beside it, renamed over it)."""
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        Path(tmp).chmod(mode)
        Path(tmp).replace(target)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                Path(tmp).unlink()
        raise TableError(f"cannot write the tuning table {path}: {_why(exc)}", help=_HELP) from None
    except BaseException:
        if tmp is not None:
            with contextlib.suppress(OSError):
                Path(tmp).unlink()
        raise


def _text(entries: list[Any], extra: Mapping[str, Any] | None = None) -> str:
    """A table's JSON, one entry a line (a diff of two tables shows the entries that moved);
    `extra`: other top-level fields the file had, kept before the entries."""
    lines = ",\n".join("  " + json.dumps(e) for e in entries)
    more = "".join(f"{json.dumps(k)}: {json.dumps(v)}, " for k, v in (extra or {}).items())
    head = f'{{"format": "{FORMAT}", "version": {VERSION}, {more}"entries": [\n'
    return head + lines + ("\n" if lines else "") + "]}\n"
