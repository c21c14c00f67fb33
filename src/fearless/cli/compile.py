"""`fearless compile FILE... [--arch sm_90]`: compile kernels ahead of time into the cache.

Every `@simt.kernel` defined in the files (one a file imports is compiled from its own file) is
compiled for the arch (FEARLESS_ARCH when set, else sm_90; PTX, and a cubin where ptxas or a
driver can link one) and stored in the disk cache (FEARLESS_CACHE_DIR), so that a machine
without the compiler toolchain, or a first launch, finds it there. No GPU is needed. SIMT
kernels specialise on their annotations alone. Tile kernels specialise on a launch's tile
shapes, Consts and divisibility, so the file declares the launches it wants ready with
`kernel.specialise(tile.Spec(shape, dtype).partition(tile), tile.Spec(...), ...)`
(tile/aot.py); each is compiled to a cubin with tileiras. A Tile kernel with none declared is
listed as compiling at its first launch. Diagnostics and errors go to stderr, the ✓ lines and
the summary to stdout.

A file whose import raises is reported as Python would (the SyntaxError with its caret, or
the traceback from the file's first frame on). A cache that cannot store the kernels (a folder
that cannot be written or made, FEARLESS_NO_DISK_CACHE set) is an error naming the folder and
why: the run stops there, as nothing it compiled would be found later.

Exit status: 0 all compiled and stored, 1 a file did not import, a kernel did not compile (its
diagnostic is printed) or the cache could not store it, 2 usage.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import cache, config
from ..errors import FearlessError
from .inspect import UsageError, load_module
from .run import print_user_exception

ARCHES = ("sm_80", "sm_90", "sm_90a")  # backends/llvm/ptx.py's PTX_FEATURES
DEFAULT_ARCH = "sm_90"


HELP = "compile the kernels of files ahead of time into the cache (no GPU needed)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", metavar="FILE", nargs="+", type=Path)
    parser.add_argument(
        "--arch", choices=ARCHES, default=None, help="default: FEARLESS_ARCH when set, else sm_90"
    )


def _error(message: str) -> None:
    print(message, file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    arch = args.arch or config.arch_override() or DEFAULT_ARCH
    if arch not in ARCHES:
        _error(
            f"fearless compile: error: FEARLESS_ARCH={arch!r} is not an arch fearless compiles "
            f"for\n  = help: set it to one of {', '.join(ARCHES)}, unset it, or pass --arch"
        )
        return 2
    if config.cache_disabled():
        _error(
            f"error: the disk cache is off (FEARLESS_NO_DISK_CACHE="
            f"{config.raw('FEARLESS_NO_DISK_CACHE')}): compiled kernels would not be "
            f"stored; unset it to compile into {config.cache_dir()}"
        )
        return 1
    try:
        with cache.stores_required():
            return _compile_files(args.files, arch)
    except cache.CacheWriteError as exc:
        _error(str(exc))
        return 1


def _compile_files(files: list[Path], arch: str) -> int:
    from ..simt.api import Kernel
    from ..tile.kernel import Kernel as TileKernel

    compiled, failed, tile = 0, 0, 0
    for path in files:
        try:
            module = load_module(path)
        except UsageError as exc:
            _error(exc.render("fearless compile: error: "))
            return 2
        except Exception as exc:  # the file's own error, shown as `python FILE` would
            print_user_exception(exc, path.resolve())
            return 1
        seen: set[int] = set()
        # Public names first, so a kernel also bound to a private name is listed by its own.
        for name, obj in sorted(
            vars(module).items(), key=lambda kv: (kv[0].startswith("_"), kv[0])
        ):
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if not isinstance(obj, (Kernel, TileKernel)) or obj.func.__module__ != module.__name__:
                continue  # an imported kernel is compiled from its own file
            if isinstance(obj, Kernel):
                got = _timed(functools.partial(obj.compile, arch))
                if got is None:
                    failed += 1
                    continue
                ck, ms = got
                binary = "cubin + PTX" if ck.cubin else "PTX"
                print(f"✓ {path}::{name}  {arch}  {binary}  {ms:.0f} ms")
                compiled += 1
            else:
                done, bad = _compile_tile(f"{path}::{name}", obj, arch)
                compiled, failed = compiled + done, failed + bad
                tile += not (done or bad)
    print(
        f"compiled {compiled} kernel(s) into {config.cache_dir()}"
        + (f", {failed} failed" if failed else "")
        + (f", {tile} Tile kernel(s) left for their first launch" if tile else "")
    )
    return 1 if failed else 0


def _compile_tile(where: str, kernel: Any, arch: str) -> tuple[int, int]:
    """Compile a Tile kernel's declared specialisations: (compiled, failed)."""
    declared = kernel.declared_specialisations()
    if not declared:
        print(
            f"- {where}  Tile kernel: no `{kernel.name}.specialise(...)` declared, "
            "compiled at its first launch"
        )
        return 0, 0
    compiled = failed = 0
    for specs in declared:
        got = _timed(functools.partial(kernel.compile, kernel.signature_of_specs(specs), arch))
        if got is None:
            failed += 1
        else:
            print(f"✓ {where}  {arch}  cubin ({_describe(specs)})  {got[1]:.0f} ms")
            compiled += 1
    return compiled, failed


def _timed(compile_one: Callable[[], Any]) -> tuple[Any, float] | None:
    """One compile and its time in ms, or None once the kernel's error is printed (a cache
    that stored nothing stops the whole command: CacheWriteError)."""
    start = time.perf_counter()
    try:
        result = compile_one()
    except cache.CacheWriteError:
        raise
    except FearlessError as exc:
        _error(str(exc))
        return None
    return result, (time.perf_counter() - start) * 1e3


def _describe(specs: Any) -> str:
    from ..tile.aot import PartSpec, Spec

    out = []
    for s in specs:
        if isinstance(s, PartSpec):
            out.append(f"{s.array.dtype.name}{list(s.array.shape)} tiles {list(s.tile)}")
        elif isinstance(s, Spec):
            out.append(f"{s.dtype.name}{list(s.shape)}")
        else:
            out.append(getattr(s, "name", repr(s)))
    return ", ".join(out)
