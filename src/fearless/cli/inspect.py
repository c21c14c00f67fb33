"""`fearless inspect FILE::KERNEL --emit STAGE`: prints one compiler stage of a kernel.

FILE is imported as a module (its `if __name__ == "__main__":` block does not run), KERNEL is
looked up in it, and `KERNEL.inspect(stage=STAGE)` is printed. That needs every parameter of
the kernel annotated, so the compiler can specialise it without arguments.

Exit status: 0 printed, 1 a fearless diagnostic (the kernel does not compile), 2 a usage error
(no such file, no such kernel, not a kernel).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

from .. import config
from ..errors import FearlessError
from .run import print_user_exception

STAGES = ("ir", "llvm", "ptx", "sass", "tileir", "resources")


class UsageError(Exception):
    """A mistake on the command line; printed as one line, exit status 2."""


HELP = (
    "print a compiler stage of a kernel: ir, llvm, ptx (SIMT), tileir (Tile), sass, or its "
    "resources (registers, stack, shared memory)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target", metavar="FILE::KERNEL", help="e.g. examples/simt_kernels.py::vecadd"
    )
    parser.add_argument(
        "--emit", choices=STAGES, default="ir", help="the stage to print (default: ir)"
    )


def split_target(target: str) -> tuple[Path, str]:
    file, sep, name = target.rpartition("::")
    if not sep or not file or not name:
        raise UsageError(f"expected FILE::KERNEL, got {target!r} (e.g. kernels.py::vecadd)")
    return Path(file), name


def load_module(path: Path) -> types.ModuleType:
    """Import a file as a module named after it, without running its `__main__` block."""
    if not path.is_file():
        raise UsageError(f"no such file: {path}")
    path = path.resolve()
    # a private name: the user's `kernels.py` must not stand in for an installed package of
    # that name (Hugging Face's `kernels`, say) for the rest of the process
    name = f"_fearless_file_{path.stem}" if path.stem.isidentifier() else "__kernels__"
    if name in sys.modules:
        name = "__kernels__"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    sys.path.insert(0, str(path.parent))  # so the file can import its neighbours
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        sys.path.remove(str(path.parent))
    return module


def is_kernel(obj: object) -> bool:
    """A fearless kernel of either track: it has an `inspect(*args, stage=...)` method."""
    return not isinstance(obj, (type, types.ModuleType, types.FunctionType)) and callable(
        getattr(obj, "inspect", None)
    )


def find_kernel(module: types.ModuleType, name: str, path: Path) -> Any:
    if not hasattr(module, name):
        kernels = sorted(k for k, v in vars(module).items() if is_kernel(v))
        found = f"; its kernels: {', '.join(kernels)}" if kernels else "; it defines no kernel"
        raise UsageError(f"{path} has no `{name}`{found}")
    obj = getattr(module, name)
    if not is_kernel(obj):
        what = "a plain function" if isinstance(obj, types.FunctionType) else type(obj).__name__
        raise UsageError(
            f"`{name}` in {path} is {what}, not a fearless kernel "
            "(decorate it with @simt.kernel or @tile.kernel)"
        )
    return obj


def inspect_kernel(target: str, stage: str) -> str:
    """The text of `stage` of the kernel `target` names (FILE::KERNEL). The file's own errors
    (a SyntaxError, an exception at import) pass as they are: `UserFileError` wraps them."""
    path, name = split_target(target)
    try:
        module = load_module(path)
    except UsageError:
        raise
    except Exception as exc:
        raise UserFileError(exc, path.resolve()) from exc
    return str(find_kernel(module, name, path).inspect(stage=stage))


class UserFileError(Exception):
    """The user's file raised when imported (shown as `python FILE` would show it)."""

    def __init__(self, error: Exception, path: Path) -> None:
        super().__init__(str(error))
        self.error, self.path = error, path


def run(args: argparse.Namespace) -> int:
    try:
        text = inspect_kernel(args.target, args.emit)
    except UserFileError as exc:
        print_user_exception(exc.error, exc.path)
        return 1
    except UsageError as exc:
        print(f"fearless inspect: error: {exc}", file=sys.stderr)
        return 2
    except FearlessError as exc:
        if config.show_internal_frames():
            raise
        print(exc, file=sys.stderr)
        return 1
    print(text, end="" if text.endswith("\n") else "\n")
    return 0
