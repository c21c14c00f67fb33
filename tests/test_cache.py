"""The disk compile cache (cache.py) and what writes to disk around a build (backends/stages.py).

An entry is served only when its checksum holds and it is the entry of the key asked for; any
other entry, and any failure to read one, is a miss logged on "fearless.cache". A cache that
cannot be written still compiles (uncached, one warning). A dump folder that is a file is a
ToolchainError naming it.
"""

from __future__ import annotations

import logging
import operator
import pickle
from pathlib import Path
from typing import Any

import pytest

import fearless as fl
from fearless import cache, simt
from fearless.backends.stages import compile_cached
from fearless.errors import ToolchainError

KEY = "ab" + "0" * 62
OTHER = "cd" + "1" * 62


@simt.kernel
def vadd(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = a[i] + b[i]


@simt.kernel
def vsub(a: simt.Slice[fl.f32], b: simt.Slice[fl.f32], out: simt.DisjointSlice[fl.f32]):
    i = simt.thread.index_1d()
    if i < len(out):
        out[i] = a[i] - b[i]


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(folder))
    monkeypatch.delenv("FEARLESS_NO_DISK_CACHE", raising=False)
    return folder


def entry_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.pkl"))


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "fearless.cache"]


class Raises:
    """Unpickles by calling `func(*args)`, which raises (an entry whose pickle fails to load)."""

    def __init__(self, func: Any, *args: Any) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.func, self.args


# --- corrupted entries are misses ----------------------------------------------------------


def test_an_entry_round_trips(cache_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert cache.store(KEY, {"ptx": "add.f32", "cubin": b"\x7fELF"}) is True
    assert cache.load(KEY) == {"ptx": "add.f32", "cubin": b"\x7fELF"}
    assert cache.load(OTHER) is None  # never stored: a miss, and nothing to say about it
    assert warnings_of(caplog) == []
    assert cache.FORMAT != "v1"  # entries of the unchecked format are never read
    assert entry_files(cache_dir)[0].parent.parent.name == cache.FORMAT


def test_swapped_entries_are_misses_and_the_kernels_are_built_again(
    cache_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    add_ptx = simt.kernel(vadd.func).compile("sm_90").ptx
    sub_ptx = simt.kernel(vsub.func).compile("sm_90").ptx
    first, second = entry_files(cache_dir)
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    caplog.set_level(logging.WARNING, "fearless.cache")
    # Fresh Kernels (nothing memoised): each must get its own code, not the other's.
    assert simt.kernel(vadd.func).compile("sm_90").ptx == add_ptx
    assert simt.kernel(vsub.func).compile("sm_90").ptx == sub_ptx
    logged = warnings_of(caplog)
    assert len(logged) == 2 and all("another key" in m for m in logged)
    assert [str(first) in m for m in logged].count(True) == 1
    assert [str(second) in m for m in logged].count(True) == 1
    # The rebuilt entries replaced the swapped ones: the next compile is a silent hit.
    caplog.clear()
    assert simt.kernel(vadd.func).compile("sm_90").ptx == add_ptx
    assert warnings_of(caplog) == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data.replace(b"add.f32", b"sub.f32"),  # the PTX edited in place
        lambda data: data.replace(b"\x7fELF\x02\x01", b"\x7fELF\x03\x01"),  # a bit flipped
        lambda data: data[: len(data) // 2],  # cut short
        lambda data: b"",
    ],
    ids=["ptx-edited", "cubin-bit-flipped", "truncated", "empty"],
)
def test_a_damaged_entry_is_a_logged_miss(
    cache_dir: Path, caplog: pytest.LogCaptureFixture, damage: Any
) -> None:
    assert cache.store(KEY, {"ptx": "add.f32 %f1, %f2, %f3;", "cubin": b"\x7fELF\x02\x01"})
    (path,) = entry_files(cache_dir)
    path.write_bytes(damage(path.read_bytes()))
    caplog.set_level(logging.WARNING, "fearless.cache")
    assert cache.load(KEY) is None
    (message,) = warnings_of(caplog)
    assert str(path) in message


def test_an_entry_of_the_old_format_is_a_logged_miss(
    cache_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = cache.path_of(KEY)
    path.parent.mkdir(parents=True)
    path.write_bytes(pickle.dumps({"ptx": "add.f32"}))  # a bare pickle, as v1 wrote
    caplog.set_level(logging.WARNING, "fearless.cache")
    assert cache.load(KEY) is None
    (message,) = warnings_of(caplog)
    assert str(path) in message and "not a fearless cache entry" in message


# --- any failure to read an entry is a miss ------------------------------------------------

BAD_PICKLES = {
    "unknown-protocol": b"\x80\x09N.",
    "unicode-decode-error": b"\x80\x04X\x02\x00\x00\x00\xff\xfe.",
    "value-error": pickle.dumps(Raises(int, "not a number")),
    "index-error": pickle.dumps(Raises(operator.getitem, b"", 1)),
    "memory-error": pickle.dumps(Raises(bytearray, 2**62)),
    "truncated-pickle": pickle.dumps({"ptx": "x" * 100})[:-10],
    "missing-module": b"cnosuchmodule\nCompiledKernel\n.",
}


@pytest.mark.parametrize("payload", BAD_PICKLES.values(), ids=BAD_PICKLES.keys())
def test_an_entry_that_fails_to_unpickle_is_a_logged_miss(
    cache_dir: Path, caplog: pytest.LogCaptureFixture, payload: bytes
) -> None:
    path = cache.path_of(KEY)
    path.parent.mkdir(parents=True)
    path.write_bytes(cache.encode(KEY, payload))  # the checksum holds: the pickle itself fails
    caplog.set_level(logging.WARNING, "fearless.cache")
    assert compile_cached(KEY, tuple, lambda: (1, 2)) == (1, 2)  # a miss, not an error
    (message,) = warnings_of(caplog)
    assert str(path) in message and "cannot unpickle" in message
    caplog.clear()
    assert compile_cached(KEY, tuple, lambda: (3, 4)) == (1, 2)  # rebuilt and stored
    assert warnings_of(caplog) == []


def test_an_unreadable_entry_is_a_logged_miss(
    cache_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = cache.path_of(KEY)
    path.mkdir(parents=True)  # a folder where the entry file should be: reading it fails
    caplog.set_level(logging.WARNING, "fearless.cache")
    assert cache.load(KEY) is None
    (message,) = warnings_of(caplog)
    assert str(path) in message and "cannot read" in message


# --- a cache that cannot be written --------------------------------------------------------


def unwritable_folders(tmp_path: Path) -> list[Path]:
    """A file, a folder below a file, and (on Linux) a folder under /proc, which no one may
    make (a folder without write permission would not do: the tests may run as root)."""
    (tmp_path / "a-file").write_text("")
    proc = [Path("/proc/fearless-cache")] if Path("/proc/self").is_dir() else []
    return [tmp_path / "a-file", tmp_path / "a-file" / "cache", *proc]


def test_store_says_whether_it_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("FEARLESS_NO_DISK_CACHE", raising=False)
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "cache"))
    assert cache.store(KEY, (1,)) is True
    caplog.set_level(logging.WARNING, "fearless.cache")
    for folder in unwritable_folders(tmp_path):
        monkeypatch.setenv("FEARLESS_CACHE_DIR", str(folder))
        caplog.clear()
        assert cache.store(KEY, (1,)) is False
        assert cache.store(OTHER, (2,)) is False
        (message,) = warnings_of(caplog)  # once per folder, not once per kernel
        assert str(folder) in message
    monkeypatch.setenv("FEARLESS_NO_DISK_CACHE", "1")
    assert cache.store(KEY, (1,)) is False


def test_a_file_in_the_way_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FEARLESS_NO_DISK_CACHE", raising=False)
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    with pytest.raises(cache.CacheWriteError) as info, cache.stores_required():
        cache.store(KEY, (1,))
    assert info.value.code == "E0900"
    assert f"cache folder {tmp_path / 'a-file' / 'cache'}" in info.value.message
    assert f"{tmp_path / 'a-file'} is a file, not a folder" in info.value.message
    assert cache.store(KEY, (1,)) is False  # outside `stores_required()`: no error


def test_compiling_with_an_unwritable_cache_still_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("FEARLESS_NO_DISK_CACHE", raising=False)
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("FEARLESS_CACHE_DIR", str(tmp_path / "a-file"))
    caplog.set_level(logging.WARNING, "fearless.cache")
    ck = simt.kernel(vadd.func).compile("sm_90")
    assert ".entry" in ck.ptx
    assert simt.kernel(vsub.func).compile("sm_90").ptx != ck.ptx
    (message,) = warnings_of(caplog)
    assert str(tmp_path / "a-file") in message and "is a file, not a folder" in message
    # and the kernel still runs (on the simulator here)
    a = fl.asarray([1.0, 2.0], dtype=fl.f32)
    out = fl.empty(2)
    vadd[1, 32](a, a, out)
    assert list(out.numpy()) == [2.0, 4.0]


# --- FEARLESS_DUMP into a file -------------------------------------------------------------


def test_a_dump_folder_that_is_a_file_is_a_toolchain_error(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = tmp_path / "dump"
    dump.write_text("not a folder")
    monkeypatch.setenv("FEARLESS_DUMP", "ir,llvm,ptx")
    monkeypatch.setenv("FEARLESS_DUMP_DIR", str(dump))
    with pytest.raises(ToolchainError) as info:
        simt.kernel(vadd.func).compile("sm_90")
    assert info.value.code == "E0900"
    assert str(dump) in info.value.message and "is a file, not a folder" in info.value.message
    assert info.value.help is not None and "FEARLESS_DUMP_DIR" in info.value.help
    monkeypatch.setenv("FEARLESS_DUMP_DIR", str(dump / "sub"))  # a file above it
    with pytest.raises(ToolchainError, match="is a file, not a folder"):
        simt.kernel(vadd.func).compile("sm_90")
