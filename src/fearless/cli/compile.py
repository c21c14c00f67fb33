"""`fearless compile FILE... [--arch sm_90]`: compile kernels ahead of time into the cache.

Every `@simt.kernel` in the files is compiled for the arch (PTX, and a cubin where ptxas or a
driver can link one) and stored in the disk cache (FEARLESS_CACHE_DIR), so that a machine
without the compiler toolchain, or a first launch, finds it there. No GPU is needed. SIMT
kernels specialise on their annotations alone; Tile kernels specialise on the shapes of a
launch, so they are listed as needing one (they compile at their first launch, or through
`kernel.inspect(*args, stage="tileir")` with example arguments).

Exit status: 0 all compiled, 1 a kernel did not compile (its diagnostic is printed), 2 usage.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from .. import config
from ..errors import FearlessError
from .inspect import UsageError, load_module

ARCHES = ("sm_80", "sm_90", "sm_90a")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "compile",
        help="compile the kernels of files ahead of time into the cache (no GPU needed)",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("files", metavar="FILE", nargs="+", type=Path)
    parser.add_argument("--arch", choices=ARCHES, default="sm_90", help="default: sm_90")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..simt.api import Kernel
    from ..tile.kernel import Kernel as TileKernel

    compiled, failed, tile = 0, 0, 0
    for path in args.files:
        try:
            module = load_module(path)
        except UsageError as exc:
            print(f"error: {exc}")
            return 2
        for name, obj in sorted(vars(module).items()):
            if isinstance(obj, Kernel) and obj.func.__module__ == module.__name__:
                start = time.perf_counter()
                try:
                    ck = obj.compile(args.arch)
                except FearlessError as exc:
                    print(str(exc))
                    failed += 1
                    continue
                ms = (time.perf_counter() - start) * 1e3
                binary = "cubin + PTX" if ck.cubin else "PTX"
                print(f"✓ {path}::{name}  {args.arch}  {binary}  {ms:.0f} ms")
                compiled += 1
            elif isinstance(obj, TileKernel):
                print(
                    f"- {path}::{name}  Tile kernel: specialised by a launch's shapes, "
                    "compiled at its first launch"
                )
                tile += 1
    print(
        f"compiled {compiled} kernel(s) into {config.cache_dir()}"
        + (f", {failed} failed" if failed else "")
        + (f", {tile} Tile kernel(s) left for their first launch" if tile else "")
    )
    return 1 if failed else 0
