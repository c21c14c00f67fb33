"""The stage seam of both tracks' code generation: a stage list and the one loop that runs it.

A track's backend is a list of `Stage`s, as in Triton's `add_stages`: each turns the previous
stage's output into its own and says what FEARLESS_DUMP writes of it. `run_stages` runs a list
and writes the dumps; `compile_cached` puts the disk cache around a whole build. The tracks'
drivers (simt/compiler.py, tile/compiler.py) only list their stages and assemble the result:

    SIMT  llvm (llvmlite module) -> ptx (text) -> cubin (bytes, or None: the driver JITs the PTX)
    Tile  bytecode (Tile IR bytecode) -> cubin (tileiras)

A new backend is a new stage list over the same IR; the cache and the dumps come with the loop.
A dump that cannot be written (FEARLESS_DUMP_DIR is a file, or not writable) is a ToolchainError
(E0900) naming the path.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .. import cache, config
from ..errors import ToolchainError

T = TypeVar("T")

Dump = Callable[[str, Any], Mapping[str, str | bytes]]


@dataclass(frozen=True)
class Stage:
    """One step of code generation.

    name  the stage's name in FEARLESS_DUMP (`FEARLESS_DUMP=llvm,ptx` writes those stages)
    run   the previous stage's output (the IR for the first stage) -> this stage's output
    dump  (kernel name, output) -> {file name: text or bytes} written under FEARLESS_DUMP_DIR
    """

    name: str
    run: Callable[[Any], Any]
    dump: Dump | None = None


def run_stages(stages: Sequence[Stage], value: Any, kernel: str) -> dict[str, Any]:
    """Run `stages` in order on `value`; every stage's output, by stage name."""
    outputs: dict[str, Any] = {}
    for stage in stages:
        value = stage.run(value)
        outputs[stage.name] = value
        if stage.dump is not None:
            dump(stage.name, functools.partial(stage.dump, kernel, value))
    return outputs


def dump(stage: str, files: Callable[[], Mapping[str, str | bytes]]) -> None:
    """Write `files()` under the dump directory when FEARLESS_DUMP names `stage` (the files are
    made only then: a disassembly for a dump costs nothing otherwise)."""
    if stage not in config.dump_stages():
        return
    out = config.dump_dir()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _dump_error(out, out, exc) from None
    for name, data in files().items():
        path = out / name
        try:
            if isinstance(data, bytes):
                path.write_bytes(data)
            else:
                path.write_text(data)
        except OSError as exc:
            raise _dump_error(out, path, exc) from None


def _dump_error(out: Path, path: Path, exc: OSError) -> ToolchainError:
    """FEARLESS_DUMP could not write `path` (under the dump folder `out`)."""
    blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if isinstance(exc, FileExistsError | NotADirectoryError) and blocker is not None:
        why = f"{blocker} is a file, not a folder"
    else:
        why = exc.strerror or str(exc)
    what = f"the FEARLESS_DUMP files to {out}" if path == out else f"the FEARLESS_DUMP file {path}"
    return ToolchainError(
        f"cannot write {what}: {why}",
        help=f"set FEARLESS_DUMP_DIR to a folder fearless can create or write to (it is {out}), "
        "or unset FEARLESS_DUMP",
    )


def compile_cached(key: str, kind: type[T], build: Callable[[], T]) -> T:
    """The entry `key` of the disk cache when it holds a `kind`, else `build()`, stored (a
    cache that cannot be read or written is a miss: see cache.py)."""
    hit = cache.load(key)
    if isinstance(hit, kind):
        return hit
    made = build()
    cache.store(key, made)
    return made
